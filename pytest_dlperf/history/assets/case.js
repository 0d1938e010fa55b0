// pytest-dlperf history: a case page's charts, drawn by Plotly from the figures written into the page as JSON.
// A click on a night opens the first of its links (its report), where one was kept.
(function () {
  "use strict";
  var charts = Array.prototype.slice.call(document.querySelectorAll("div.chart[data-figure]"));
  var config = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"]};
  var drawn = charts.map(function (div) {
    var figure = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    return window.Plotly.newPlot(div, figure.data, figure.layout, config).then(function (gd) {
      gd.on("plotly_click", function (event) {
        var point = event && event.points && event.points[0];
        if (point && typeof point.customdata === "string" && point.customdata) { window.location.href = point.customdata; }
      });
      return gd;
    });
  });
  Promise.all(drawn).then(function () {
    document.body.setAttribute("data-ready", "1");
    if (window.performance && performance.mark) { performance.mark("dlperf-ready"); }
  });
}());
