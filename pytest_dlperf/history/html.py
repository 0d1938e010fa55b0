"""``dlperf history URL --html DIR``: the history as a static site that opens from ``file://``.

The site is one overview (``index.html``: every case of every machine class, one row each, sortable
and filterable) and one page per case and machine class (``cases/<key>.html``, its permalink:
the figure of each night with its runs' spread, the baseline and its tolerance band, change
points with their step, interval and what changed, the verdict of each night and why). Its
charts are Plotly's (https://plotly.com/javascript/), drawn in the browser from figures this
module writes into each page as JSON; ``plotly.min.js`` is copied from the ``plotly`` package
into ``assets/``, with the site's own script and style, so that the site needs no server and no
network. The pages are Jinja2 templates (``templates/``) with autoescaping: a case id, a host
name or a verdict's line is text, never markup.

The site is written whole into a temporary folder beside ``DIR`` and moved into place: a reader
never sees half a site, and a build that fails leaves the one before as it was.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html as _html
import importlib.util
import json
import os
import shutil
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from .dashboard import SPARK_NIGHTS, CaseView, Night, Standing, StepState, utc
from .records import finite
from .text import _figure

HERE = Path(__file__).resolve().parent
ASSETS = HERE / "assets"
TEMPLATES = HERE / "templates"
#: The file that marks a folder as a site this module wrote (and so one it may replace).
MARKER = "dlperf-site.json"

#: Each verdict's colour and label, in the order of the legend.
VERDICTS: dict[str, tuple[str, str]] = {
    "pass": ("#2e7d32", "pass"),
    "improved": ("#1565c0", "improved"),
    "no-baseline": ("#78909c", "no baseline"),
    "inconclusive": ("#ef8f00", "inconclusive"),
    "fail": ("#c62828", "fail"),
    "error": ("#212121", "error"),
}
UNKNOWN_VERDICT = ("#9e9e9e", "other")
#: How a night that is no point of the trend is drawn (Plotly marker symbols).
OFF_TREND: dict[Standing, tuple[str, str, str]] = {
    Standing.INCONCLUSIVE: ("circle-open", "#ef8f00", "inconclusive night (not on the trend)"),
    Standing.BUSY: ("x-thin-open", "#616161", "busy night (not on the trend)"),
}
TREND_COLOR = "#1f5fa8"
DOWN, UP = "#c62828", "#2e7d32"


class SiteError(OSError):
    """A site that cannot be written; the message names the folder and the problem."""


def missing(what: str) -> str | None:
    """Why ``what`` cannot build a site here (Plotly's script or Jinja2 missing), or None when it can."""
    absent = [name for name in ("plotly", "jinja2") if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return f"{what} needs {' and '.join(absent)}: pip install 'pytest-dlperf[history]'"


def plotly_js() -> Path:
    """``plotly.min.js`` as the ``plotly`` package ships it (its Python half is not needed)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise SiteError("the site needs plotly's plotly.min.js: pip install 'pytest-dlperf[history]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise SiteError(f"the plotly package has no {path.name} at {path}; reinstall plotly")
    return path


# --------------------------------------------------------------------------- formatting


def fmt(value: float | None) -> str:
    return "—" if value is None else _figure(value)


def pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:+.{digits}f}%".replace("-", "−")


def when(night: Night) -> str:
    """The night's time for a chart's x axis (UTC, which Plotly reads as it is)."""
    return night.stamp


def num(value: float | None) -> float | None:
    """A figure for a chart, to 6 significant digits (what a reader can see, and half the JSON)."""
    return None if value is None else float(f"{value:.6g}")


def plain(text: Any) -> str:
    """Text for Plotly's labels, which read a few tags (<b>, <br>): a case's own text shows as itself."""
    return _html.escape(str(text), quote=False)


def _verdict(name: str) -> tuple[str, str]:
    return VERDICTS.get(name, UNKNOWN_VERDICT)


def _short(text: str | None, limit: int = 220) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _runs_text(night: Night, unit: str) -> str:
    runs = night.runs
    if len(runs) <= 1:
        return ""
    return f"<br>{len(runs)} runs: {fmt(min(runs))} .. {fmt(max(runs))} {plain(unit)}"


def _night_hover(view: CaseView, night: Night) -> str:
    """A night's hover label: its figure against the baseline, when and where, its verdict and why."""
    s = night.session
    lines = [f"<b>{fmt(night.value)} {plain(view.unit)}</b>"
             + (f" ({pct(night.change)} vs baseline {fmt(night.baseline)})" if night.change is not None else ""),
             f"{when(night)} UTC · {plain(s.hostname or '?')}"
             + (f" · git {plain(s.short_commit)}" if s.short_commit else "")]
    verdict = night.row.verdict + (" (busy: " + plain(night.row.busy) + ")" if night.row.busy else "")
    lines.append(f"verdict: {plain(verdict)}")
    if night.row.busy_runs:
        lines.append(f"{night.row.busy_runs} run(s) measured on a busy machine")
    if night.row.message:
        lines.append(plain(_short(night.row.message, 160)))
    return "<br>".join(lines) + _runs_text(night, view.unit)


def _strip_hover(night: Night) -> str:
    """The verdict strip's label: a night with a figure has its whole label on the chart above."""
    head = f"{when(night)} UTC: {plain(night.row.verdict)}"
    if night.value is not None:
        return head
    what = "no figure" if night.raw is None else f"not a finite figure ({night.raw!r})"
    why = f"<br>{plain(_short(night.row.message, 160))}" if night.row.message else ""
    return f"{head} ({what}){why}"


def _steps(nights: Sequence[Night]) -> list[Night]:
    """The nights where the baseline or its tolerance changes, and the last: enough for a step line."""
    out = []
    for n, night in enumerate(nights):
        if n == 0 or n == len(nights) - 1 or (night.baseline, night.tolerance) != (nights[n - 1].baseline,
                                                                                 nights[n - 1].tolerance):
            out.append(night)
    return out


def _link_target(target: str, is_url: bool, page_dir: Path) -> str:
    if is_url:
        return target
    relative = os.path.relpath(target, page_dir)
    return urllib.parse.quote(Path(relative).as_posix())


# --------------------------------------------------------------------------- figures (Plotly's JSON)


def trend_figure(view: CaseView, page_dir: Path) -> dict[str, Any]:
    """The case's chart: each night's figure with its runs' spread, inconclusive and busy nights apart,
    the baseline and its tolerance band, the level between change points, each change point (its step,
    interval and what changed on hover), and a strip of every night's verdict below."""
    nights = view.nights
    trend = view.trend
    unit = view.unit
    data: list[dict[str, Any]] = []
    # The baseline and its band, over every night that was judged against one.
    judged = _steps([n for n in nights if n.baseline is not None])
    if judged:
        xs = [when(n) for n in judged]
        lows = [num(n.baseline * (1 - (n.tolerance or 0))) for n in judged]
        highs = [num(n.baseline * (1 + (n.tolerance or 0))) for n in judged]
        if len(judged) > 1:  # a band needs two nights; one night's baseline is a marker
            data.append({"type": "scatter", "mode": "lines", "x": xs, "y": lows, "line": {"width": 0, "shape": "hv"},
                         "hoverinfo": "skip", "showlegend": False, "name": "tolerance"})
            data.append({"type": "scatter", "mode": "lines", "x": xs, "y": highs, "fill": "tonexty",
                         "fillcolor": "rgba(46,125,50,0.10)", "line": {"width": 0, "shape": "hv"},
                         "name": "tolerance band", "hoverinfo": "skip"})
        data.append({"type": "scatter", "mode": "lines" if len(judged) > 1 else "markers", "x": xs,
                     "y": [num(n.baseline) for n in judged], "marker": {"symbol": "line-ew-open", "size": 18,
                                                                         "color": "#2e7d32"},
                     "line": {"color": "#2e7d32", "width": 1.2, "dash": "dash", "shape": "hv"}, "name": "baseline",
                     "text": [f"baseline {fmt(n.baseline)} {plain(unit)}, tolerance "
                              f"{'—' if n.tolerance is None else f'{100 * n.tolerance:.0f}%'}" for n in judged],
                     "hovertemplate": "%{text}<extra></extra>"})
    if trend:
        plus = [num(max(n.runs) - n.value) if len(n.runs) > 1 else 0 for n in trend]
        minus = [num(n.value - min(n.runs)) if len(n.runs) > 1 else 0 for n in trend]
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"{view.measure.label} (median of a night)",
                     "x": [when(n) for n in trend], "y": [num(n.value) for n in trend],
                     "line": {"color": TREND_COLOR, "width": 1.4}, "marker": {"size": 6, "color": TREND_COLOR},
                     "error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
                                 "color": "rgba(31,95,168,0.45)", "thickness": 1, "width": 0},
                     "text": [_night_hover(view, n) for n in trend],
                     **_clicks(trend, page_dir),
                     "hovertemplate": "%{text}<extra></extra>"})
    for standing, (symbol, color, label) in OFF_TREND.items():
        off = [n for n in nights if n.standing is standing]
        if off:
            data.append({"type": "scatter", "mode": "markers", "name": label, "x": [when(n) for n in off],
                         "y": [num(n.value) for n in off], "marker": {"symbol": symbol, "size": 9, "color": color,
                                                                  "line": {"width": 1.5, "color": color}},
                         "text": [_night_hover(view, n) for n in off],
                         **_clicks(off, page_dir),
                         "hovertemplate": "%{text}<extra></extra>"})
    shapes, annotations = [], []
    history = view.history
    if history is not None and history.change_points:
        bounds = [0] + [p.step.index for p in history.change_points] + [len(trend)]
        levels = [p.step.before for p in history.change_points] + [history.change_points[-1].step.after]
        xs, ys = [], []
        for n, level in enumerate(levels):
            xs += [when(trend[bounds[n]]), when(trend[bounds[n + 1] - 1]), None]
            ys += [num(level), num(level), None]
        data.append({"type": "scatter", "mode": "lines", "name": "level between change points", "x": xs, "y": ys,
                     "line": {"color": "#6d4c41", "width": 1.2, "dash": "dot"}, "hoverinfo": "skip"})
        marks = {"x": [], "y": [], "text": [], "color": [], "symbol": []}
        for point in history.change_points:
            step = point.step
            worse = view.measure.regression(step.change)
            color = DOWN if worse else UP
            after, before = trend[step.index], trend[step.index - 1]
            middle = utc(before.session.created) + (utc(after.session.created) - utc(before.session.created)) / 2
            x = middle.strftime("%Y-%m-%d %H:%M:%S")
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0.13, "y1": 1,
                           "line": {"color": color, "width": 1.5, "dash": "dash"}})
            annotations.append({"x": x, "y": 1, "xref": "x", "yref": "paper", "yanchor": "top", "xanchor": "left",
                                "showarrow": False, "font": {"color": color, "size": 11},
                                "text": f"{pct(step.change)} [{pct(step.low)}, {pct(step.high)}]"})
            marks["x"].append(when(after))
            marks["y"].append(num(step.after))
            marks["color"].append(color)
            marks["symbol"].append("triangle-down" if step.down else "triangle-up")
            changes = "<br>".join(f"· {plain(c)}" for c in point.changes) or "· no environment difference recorded"
            marks["text"].append(
                f"<b>change point: {pct(step.change)}</b> [{pct(step.low)}, {pct(step.high)}], p={step.pvalue:.3g}"
                f"<br>{fmt(step.before)} → {fmt(step.after)} {plain(unit)}"
                f"<br>first night after it: {when(after)} UTC<br>what changed since {when(before)}:<br>{changes}")
        data.append({"type": "scatter", "mode": "markers", "name": "change point", "x": marks["x"], "y": marks["y"],
                     "marker": {"size": 14, "color": marks["color"], "symbol": marks["symbol"],
                                "line": {"width": 1, "color": "#ffffff"}},
                     "text": marks["text"], "hovertemplate": "%{text}<extra></extra>"})
    if history is not None and history.newest_step is not None:
        step = history.newest_step
        annotations.append({"x": when(trend[-1]), "y": num(trend[-1].value), "xref": "x", "yref": "y", "ax": -40,
                            "ay": -40, "showarrow": True, "arrowcolor": DOWN, "font": {"color": DOWN, "size": 11},
                            "text": f"newest figures start a step of {pct(step.change)}"})
    # The verdict of every night, whatever its figure, in a strip below.
    for verdict in list(VERDICTS) + sorted({n.row.verdict for n in nights} - set(VERDICTS)):
        these = [n for n in nights if n.row.verdict == verdict]
        if not these:
            continue
        color, label = _verdict(verdict)
        data.append({"type": "scatter", "mode": "markers", "name": f"verdict: {label}", "x": [when(n) for n in these],
                     "y": [0] * len(these), "yaxis": "y2", "legendgroup": "verdicts",
                     "marker": {"symbol": ["x" if n.standing is Standing.BUSY else "square" for n in these],
                                "size": 9, "color": color},
                     "text": [_strip_hover(n) for n in these],
                     **_clicks(these, page_dir),
                     "hovertemplate": "%{text}<extra></extra>"})
    layout = {
        "height": 540, "margin": {"l": 70, "r": 24, "t": 30, "b": 50}, "hovermode": "closest",
        "hoverlabel": {"align": "left"}, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.12, "x": 0, "font": {"size": 11}},
        "xaxis": {**_time_axis(nights), "anchor": "y2"},
        "yaxis": {"domain": [0.15, 1], "title": {"text": unit or view.measure.label}, "gridcolor": "#eceff1",
                  "zeroline": False},
        "yaxis2": {"domain": [0, 0.07], "range": [-1, 1], "showticklabels": False, "showgrid": False,
                   "zeroline": False, "fixedrange": True, "title": {"text": "verdict", "font": {"size": 10}}},
        "shapes": shapes, "annotations": annotations, "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
    }
    return {"data": data, "layout": layout}


def _time_axis(nights: Sequence[Night]) -> dict[str, Any]:
    """A chart's date axis over a case's nights; sessions of one day get hours on it, not fractions of a second."""
    axis: dict[str, Any] = {"type": "date", "showgrid": True, "gridcolor": "#eceff1"}
    first, last = nights[0].when, nights[-1].when
    if last - first < _dt.timedelta(days=1):
        pad = max((last - first) * 0.05, _dt.timedelta(minutes=30))
        axis["range"] = [(first - pad).strftime("%Y-%m-%d %H:%M:%S"), (last + pad).strftime("%Y-%m-%d %H:%M:%S")]
    return axis


def extra_figure(view: CaseView) -> dict[str, Any] | None:
    """Scaling efficiency and MFU over the nights that have them, in percent; None where none has either."""
    data = []
    for field, label, color in (("scaling_efficiency", "scaling efficiency", "#6a1b9a"), ("mfu", "MFU", "#00838f")):
        these = [n for n in view.nights if _finite_field(n, field)]
        if these:
            data.append({"type": "scatter", "mode": "lines+markers", "name": f"{label} (%)",
                         "x": [when(n) for n in these], "y": [num(100 * getattr(n.row, field)) for n in these],
                         "line": {"color": color, "width": 1.4}, "marker": {"size": 5},
                         "text": [f"{label}: {100 * getattr(n.row, field):.1f}% · {when(n)} UTC" for n in these],
                         "hovertemplate": "%{text}<extra></extra>"})
    if not data:
        return None
    layout = {"height": 300, "margin": {"l": 70, "r": 24, "t": 20, "b": 40}, "hovermode": "closest",
              "legend": {"orientation": "h", "y": -0.2, "x": 0}, "xaxis": _time_axis(view.nights),
              "yaxis": {"title": {"text": "%"}, "rangemode": "tozero", "gridcolor": "#eceff1"},
              "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff",
              "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}}
    return {"data": data, "layout": layout}


def _finite_field(night: Night, field: str) -> bool:
    return finite(getattr(night.row, field))


def _clicks(nights: Sequence[Night], page_dir: Path) -> dict[str, Any]:
    """Each night's first link, where any night has one: what a click on its point opens (assets/case.js)."""
    if not any(n.links for n in nights):
        return {}
    return {"customdata": [_first_link(n, page_dir) for n in nights]}


def _first_link(night: Night, page_dir: Path) -> str | None:
    return _link_target(night.links[0].target, night.links[0].is_url, page_dir) if night.links else None


# --------------------------------------------------------------------------- pages


@dataclasses.dataclass(frozen=True)
class SiteSummary:
    """What a build wrote."""

    folder: Path
    cases: int
    machines: int
    sessions: int
    seconds: float

    @property
    def index(self) -> Path:
        return self.folder / "index.html"


def sparkline(view: CaseView, width: int = 120, height: int = 26) -> dict[str, Any]:
    """The last :data:`~.dashboard.SPARK_NIGHTS` nights as SVG coordinates: the trend as a line, nights off
    it as grey dots."""
    nights = [n for n in view.nights[-SPARK_NIGHTS:] if n.value is not None]
    if not nights:
        return {"line": "", "dots": [], "last": None, "width": width, "height": height}
    values = [n.value for n in nights]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    count = len(view.nights[-SPARK_NIGHTS:])
    index = {id(n): i for i, n in enumerate(view.nights[-SPARK_NIGHTS:])}

    def xy(night: Night) -> tuple[float, float]:
        x = 2 + (width - 4) * (index[id(night)] / max(1, count - 1))
        y = height - 3 - (height - 6) * ((night.value - low) / span if high > low else 0.5)
        return round(x, 1), round(y, 1)

    trend = [n for n in nights if n.standing is Standing.TREND]
    line = " ".join(f"{x},{y}" for x, y in map(xy, trend))
    dots = [xy(n) for n in nights if n.standing is not Standing.TREND]
    last = xy(trend[-1]) if trend else None
    return {"line": line, "dots": dots, "last": last, "width": width, "height": height}


def _settings(case: Mapping[str, Any]) -> str:
    settings = case.get("settings") or {}
    parts = [f"{k}={v}" for k, v in sorted(settings.items())]
    target = case.get("target")
    if target:
        parts.append(f"target {target.get('metric')} {target.get('value')}")
    return ", ".join(parts)


def _state_text(view: CaseView) -> str:
    step = view.open_step
    if view.state is StepState.NEWEST:
        return f"newest figures {pct(step.change)}"
    if view.state is StepState.OPEN:
        since = view.trend[step.index].session
        return f"open: {pct(step.change)} since {utc(since.created):%Y-%m-%d}"
    if view.state is StepState.CLOSED:
        return f"last step {pct(view.history.change_points[-1].step.change)} (better)"
    return "none"


def overview_row(view: CaseView) -> dict[str, Any]:
    latest = view.latest
    figure = view.latest_figure
    case = view.case
    change = latest.change
    step = view.open_step
    return {
        "view": view, "key": view.key, "href": f"cases/{view.key}.html", "model": str(case.get("model", "")),
        "precision": str(case.get("precision", "")), "batch": str(case.get("batch_size", "")),
        "gpus": str(case.get("gpus", "")), "settings": _settings(case),
        "nights": len(view.nights), "figure": fmt(latest.value), "figure_sort": "" if latest.value is None
        else repr(latest.value), "unit": view.unit,
        "earlier": None if latest.value is not None or figure is None else
        f"last figure {fmt(figure.value)} on {utc(figure.session.created):%Y-%m-%d}",
        "verdict": latest.row.verdict, "verdict_label": _verdict(latest.row.verdict)[1],
        "standing": str(latest.standing), "message": latest.row.message or "",
        "change": pct(change), "change_sort": "" if change is None else repr(change),
        # A night off the trend decided nothing: its change is shown, not coloured as a finding.
        "change_class": "" if change is None else "off" if latest.standing is not Standing.TREND
        else ("worse" if view.measure.regression(change) else "better"),
        "spark": sparkline(view), "state": str(view.state), "state_text": _state_text(view),
        "state_sort": "" if step is None else repr(step.change if view.measure.higher_is_better else -step.change),
        "date": f"{utc(latest.session.created):%Y-%m-%d %H:%M}",
        "date_sort": utc(latest.session.created).isoformat(),
    }


def _versions(session) -> str:
    return ", ".join(f"{label} {value}" for label, value in (("torch", session.torch), ("CUDA", session.cuda),
                                                             ("driver", session.driver)) if value)


def nights_table(view: CaseView, page_dir: Path, has_links: bool) -> Any:
    """The rows of a case page's table of nights, newest first, as markup. Written here rather than in the
    template (a year of nights is a few hundred rows a page); every value goes through :func:`markupsafe.escape`
    (Jinja2's own)."""
    from markupsafe import Markup, escape

    out = []
    nights = view.nights
    for index in range(len(nights) - 1, -1, -1):
        night = nights[index]
        s = night.session
        runs = night.runs
        anchor = escape(f"night-{s.id}")
        standing = str(night.standing)
        figure = fmt(night.value) if night.raw is None or night.value is not None else repr(night.raw)
        versions = _versions(s)
        if index and versions == _versions(nights[index - 1].session):
            versions = ""  # said where they changed (and on the first night), not on every row
        verdict = night.row.verdict
        cells = [
            f'<td><a href="#{anchor}">{night.when:%Y-%m-%d %H:%M}</a></td>',
            f'<td title="{escape(s.id)}">{escape(s.id[:8])}</td>',
            f"<td>{escape(s.hostname or '')}</td>",
            f"<td>{escape(s.short_commit or '')}"
            + (f' <span class="sub">{escape(s.git_branch)}</span>' if s.git_branch else "")
            + (f'<div class="sub">{escape(versions)}</div>' if versions else "") + "</td>",
            f'<td class="num">{escape(figure)}'
            + (f' <span class="standing">{escape(standing)}</span>' if night.standing is not Standing.TREND else "")
            + "</td>",
            f'<td class="num">{"" if len(runs) <= 1 else f"{len(runs)}: {fmt(min(runs))} .. {fmt(max(runs))}"}</td>',
            f'<td class="num">{fmt(night.baseline)}</td>',
            f'<td class="num">{pct(night.change)}</td>',
            f'<td class="why"><span class="verdict v-{escape(verdict)}">{escape(_verdict(verdict)[1])}</span>'
            + (f' <span class="standing">busy: {escape(night.row.busy)}</span>' if night.row.busy else "")
            + f" {escape(night.row.message or '')}</td>",
        ]
        if has_links:
            cells.append("<td>" + " ".join(f'<a href="{escape(_link_target(link.target, link.is_url, page_dir))}">'
                                           f"{escape(link.label)}</a>" for link in night.links) + "</td>")
        out.append(f'<tr id="{anchor}" class="standing-{escape(standing.replace(" ", "-"))}" '
                   f'data-standing="{escape(standing)}" data-verdict="{escape(verdict)}">{"".join(cells)}</tr>')
    return Markup("\n".join(out))


def _change_rows(view: CaseView, page_dir: Path) -> list[dict[str, Any]]:
    history = view.history
    if history is None:
        return []
    trend = view.trend
    out = []
    for n, point in enumerate(history.change_points, 1):
        step = point.step
        after, before = trend[step.index], trend[step.index - 1]
        out.append({
            "number": n, "step": pct(step.change), "interval": f"[{pct(step.low)}, {pct(step.high)}]",
            "pvalue": f"{step.pvalue:.3g}", "before": fmt(step.before), "after": fmt(step.after),
            "worse": view.measure.regression(step.change), "first": f"{utc(after.session.created):%Y-%m-%d %H:%M}",
            "first_anchor": f"night-{after.session.id}", "previous": f"{utc(before.session.created):%Y-%m-%d %H:%M}",
            "previous_anchor": f"night-{before.session.id}", "index": step.index + 1,
            "changes": list(point.changes),
        })
    return out


class _Renderer:
    """The Jinja2 environment of the site's templates, autoescaping, strict about undefined names."""

    def __init__(self) -> None:
        import jinja2

        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                      undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        # Plotly's JSON inside <script type="application/json">: no NaN (JSON.parse refuses it), compact.
        self.env.policies["json.dumps_kwargs"] = {"allow_nan": False, "separators": (",", ":")}

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)


def _unique(values: Sequence[str], key=None) -> list[str]:
    return sorted({v for v in values if v != ""}, key=key)


def _gpu_key(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (10**9, value)


def render_overview(renderer: _Renderer, views: Sequence[CaseView], meta: Mapping[str, Any]) -> str:
    rows = [overview_row(v) for v in views]
    filters = [
        ("machine", "machine class", _unique([v.machine for v in views])),
        ("model", "model", _unique([r["model"] for r in rows])),
        ("precision", "precision", _unique([r["precision"] for r in rows])),
        ("gpus", "GPUs", _unique([r["gpus"] for r in rows], key=_gpu_key)),
        ("verdict", "verdict", _unique([r["verdict"] for r in rows])),
    ]
    return renderer.render("overview.html.j2", root=".", rows=rows, filters=filters, meta=meta, verdicts=VERDICTS,
                           spark_nights=SPARK_NIGHTS)


def render_case(renderer: _Renderer, view: CaseView, meta: Mapping[str, Any], page_dir: Path) -> str:
    history = view.history
    trend = view.trend
    drift = None
    if history is not None and history.drifting:
        drift = history.trend.describe()
    newest = None
    if history is not None and history.newest_step is not None:
        newest = history.newest_step.describe()
    figures = {"trend": trend_figure(view, page_dir), "extra": extra_figure(view)}
    has_links = any(n.links for n in view.nights)
    latest = view.latest
    summary = {
        "nights": len(view.nights), "trend": len(trend), "first": f"{utc(view.nights[0].session.created):%Y-%m-%d}",
        "last": f"{utc(latest.session.created):%Y-%m-%d %H:%M}", "figure": fmt(latest.value),
        "verdict": latest.row.verdict, "verdict_label": _verdict(latest.row.verdict)[1],
        "message": latest.row.message or "", "change": pct(latest.change), "state": str(view.state),
        "state_text": _state_text(view), "settings": _settings(view.case),
        "direction": "higher is better" if view.measure.higher_is_better else "lower is better",
    }
    return renderer.render(
        "case.html.j2", root="..", view=view, meta=meta, summary=summary, figures=figures, drift=drift, newest=newest,
        notes=view.notes, changes=_change_rows(view, page_dir), nights=nights_table(view, page_dir, has_links),
        verdicts=VERDICTS, has_links=has_links)


def check_target(folder: Path) -> None:
    """``folder`` may be written: new, empty, or a site this module wrote before (it has :data:`MARKER`)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise SiteError(f"{folder}: is not a folder; give a folder for the site (it is created)")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise SiteError(f"{folder}: is a folder with other files in it, not a site dlperf wrote ({MARKER} is "
                        f"missing); give a new or empty folder")
    parent = folder.resolve().parent
    if not parent.is_dir():
        raise SiteError(f"{folder}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise SiteError(f"{folder}: cannot write into {parent}")


def write_site(views: Sequence[CaseView], folder: str | os.PathLike, *, store: str, sessions: int,
               built: _dt.datetime | None = None) -> SiteSummary:
    """Write the site of ``views`` into ``folder``, whole or not at all; :class:`SiteError` in one line."""
    started = time.perf_counter()
    folder = Path(folder)
    check_target(folder)
    final = folder.resolve()
    built = built or _dt.datetime.now(_dt.timezone.utc)
    machines = sorted({v.machine for v in views})
    meta = {"store": store, "sessions": sessions, "cases": len(views), "machines": machines,
            "built": f"{built:%Y-%m-%d %H:%M} UTC", "version": __version__}
    renderer = _Renderer()
    temporary = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        temporary.chmod(0o755)  # mkdtemp's folder is private; a site is for a web server or a team to read
        (temporary / "assets").mkdir()
        (temporary / "cases").mkdir()
        shutil.copyfile(plotly_js(), temporary / "assets" / "plotly.min.js")
        for asset in ("dashboard.css", "overview.js", "case.js"):
            shutil.copyfile(ASSETS / asset, temporary / "assets" / asset)
        (temporary / "index.html").write_text(render_overview(renderer, views, meta), encoding="utf-8")
        for view in views:
            page = render_case(renderer, view, meta, final / "cases")
            (temporary / "cases" / f"{view.key}.html").write_text(page, encoding="utf-8")
        (temporary / MARKER).write_text(json.dumps({
            "kind": "dlperf-history-site", "version": __version__, "store": store, "built": built.isoformat(),
            "sessions": sessions, "cases": [{"id": v.case_id, "machine": v.machine, "page": f"cases/{v.key}.html"}
                                            for v in views]}, indent=1) + "\n", encoding="utf-8")
        _swap(temporary, final)
    except BaseException as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, SiteError):
            raise SiteError(f"{folder}: the site was not written: {exc.strerror or exc}") from None
        raise
    return SiteSummary(final, len(views), len(machines), sessions, time.perf_counter() - started)


def _swap(temporary: Path, final: Path) -> None:
    """Put the new site in place of the old one (if any) with renames, then remove the old one."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
        final.rename(old)
    try:
        temporary.rename(final)
    except OSError:
        if old is not None:
            old.rename(final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
