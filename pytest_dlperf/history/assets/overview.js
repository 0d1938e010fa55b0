// pytest-dlperf history: the overview's filters and sorting. The rows are in the page; this only shows,
// hides and orders them, and keeps the filters and the order in the address (#machine=...&sort=change:asc).
(function () {
  "use strict";
  var table = document.getElementById("overview");
  if (!table) { document.body.setAttribute("data-ready", "1"); return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var text = document.getElementById("filter-text");
  var open = document.getElementById("filter-open");
  var shown = document.getElementById("shown");
  var none = document.getElementById("none-shown");
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells).filter(function (th) { return th.dataset.key; });
  var sort = null;  // {key, dir}

  function cellOf(row, key) {
    var index = Array.prototype.indexOf.call(table.tHead.rows[0].cells, headers.filter(function (h) { return h.dataset.key === key; })[0]);
    return row.cells[index];
  }

  function apply() {
    var wanted = {};
    selects.forEach(function (s) { if (s.value !== "") { wanted[s.dataset.filter] = s.value; } });
    var needle = text.value.trim().toLowerCase();
    var count = 0;
    rows.forEach(function (row) {
      var ok = Object.keys(wanted).every(function (key) { return row.dataset[key] === wanted[key]; });
      if (ok && needle) { ok = row.dataset.case.toLowerCase().indexOf(needle) >= 0; }
      if (ok && open.checked) { ok = row.dataset.open === "1"; }
      row.hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " cases";
    none.hidden = count !== 0;
    save();
  }

  function order() {
    headers.forEach(function (th) { th.setAttribute("aria-sort", sort && th.dataset.key === sort.key ? (sort.dir === "asc" ? "ascending" : "descending") : "none"); });
    if (!sort) { rows.forEach(function (row) { body.appendChild(row); }); return; }
    var th = headers.filter(function (h) { return h.dataset.key === sort.key; })[0];
    if (!th) { return; }
    var numeric = th.dataset.type === "number";
    var sign = sort.dir === "asc" ? 1 : -1;
    var keyed = rows.map(function (row, i) {
      var raw = cellOf(row, sort.key).dataset.sort;
      var value = numeric ? (raw === "" ? null : parseFloat(raw)) : raw.toLowerCase();
      return {row: row, value: value, i: i};
    });
    keyed.sort(function (a, b) {
      if (a.value === null && b.value === null) { return a.i - b.i; }
      if (a.value === null) { return 1; }  // no figure: last, either way
      if (b.value === null) { return -1; }
      if (a.value < b.value) { return -sign; }
      if (a.value > b.value) { return sign; }
      return a.i - b.i;
    });
    var fragment = document.createDocumentFragment();
    keyed.forEach(function (k) { fragment.appendChild(k.row); });
    body.appendChild(fragment);
  }

  function save() {
    var parts = [];
    selects.forEach(function (s) { if (s.value !== "") { parts.push(s.dataset.filter + "=" + encodeURIComponent(s.value)); } });
    if (text.value.trim()) { parts.push("text=" + encodeURIComponent(text.value.trim())); }
    if (open.checked) { parts.push("open=1"); }
    if (sort) { parts.push("sort=" + sort.key + ":" + sort.dir); }
    var hash = parts.length ? "#" + parts.join("&") : "";
    if (window.location.hash !== hash) { window.history.replaceState(null, "", hash || window.location.pathname); }
  }

  function load() {
    var state = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) { try { state[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); } catch (e) { /* a broken address: ignored */ } }
    });
    selects.forEach(function (s) {
      var value = state[s.dataset.filter];
      var known = Array.prototype.some.call(s.options, function (o) { return o.value === value; });
      s.value = value !== undefined && known ? value : "";
    });
    text.value = state.text || "";
    open.checked = state.open === "1";
    sort = null;
    if (state.sort) {
      var pieces = state.sort.split(":");
      if (headers.some(function (h) { return h.dataset.key === pieces[0]; })) { sort = {key: pieces[0], dir: pieces[1] === "desc" ? "desc" : "asc"}; }
    }
  }

  selects.forEach(function (s) { s.addEventListener("change", apply); });
  text.addEventListener("input", apply);
  open.addEventListener("change", apply);
  document.getElementById("filter-reset").addEventListener("click", function () {
    selects.forEach(function (s) { s.value = ""; });
    text.value = ""; open.checked = false; sort = null; order(); apply();
  });
  headers.forEach(function (th) {
    th.querySelector("button").addEventListener("click", function () {
      var key = th.dataset.key;
      sort = sort && sort.key === key ? {key: key, dir: sort.dir === "asc" ? "desc" : "asc"} : {key: key, dir: "asc"};
      order(); save();
    });
  });
  window.addEventListener("hashchange", function () { load(); order(); apply(); });
  load(); order(); apply();
  document.body.setAttribute("data-ready", "1");
  if (window.performance && performance.mark) { performance.mark("dlperf-ready"); }
}());
