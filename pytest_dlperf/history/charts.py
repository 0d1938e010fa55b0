"""The history site's charts: each case's nights as Plotly figures (https://plotly.com/javascript/), as JSON the
pages of :mod:`.html` carry, and how figures, changes and nights read in them and in the pages.
"""

from __future__ import annotations

import datetime as _dt
import html as _html
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .dashboard import CaseView, Night, Standing, utc
from .records import finite
from .text import figure_text, rules_moved

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


def fmt(value: float | None) -> str:
    return "—" if value is None else figure_text(value)


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


def verdict_style(name: str) -> tuple[str, str]:
    return VERDICTS.get(name, UNKNOWN_VERDICT)


def short(text: str | None, limit: int = 220) -> str:
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
        lines.append(plain(short(night.row.message, 160)))
    return "<br>".join(lines) + _runs_text(night, view.unit)


def _strip_hover(night: Night) -> str:
    """The verdict strip's label: a night with a figure has its whole label on the chart above."""
    head = f"{when(night)} UTC: {plain(night.row.verdict)}"
    if night.value is not None:
        return head
    what = "no figure" if night.raw is None else f"not a finite figure ({night.raw!r})"
    why = f"<br>{plain(short(night.row.message, 160))}" if night.row.message else ""
    return f"{head} ({what}){why}"


def _steps(nights: Sequence[Night]) -> list[Night]:
    """The nights where the baseline or its tolerance changes, and the last: enough for a step line."""
    out = []
    for n, night in enumerate(nights):
        if n == 0 or n == len(nights) - 1 or (night.baseline, night.tolerance) != (nights[n - 1].baseline,
                                                                                 nights[n - 1].tolerance):
            out.append(night)
    return out


def link_target(target: str, is_url: bool, page_dir: Path) -> str:
    if is_url:
        return target
    relative = os.path.relpath(target, page_dir)
    return urllib.parse.quote(Path(relative).as_posix())


# -- the figures (Plotly's JSON)


def trend_figure(view: CaseView, page_dir: Path) -> dict[str, Any]:
    """The case's chart: each night's figure with its runs' spread, inconclusive and busy nights apart,
    the baseline and its tolerance band, the level between change points, each change point (its step,
    interval and what changed on hover), and a strip of every night's verdict below."""
    nights, trend = view.nights, view.trend
    data = _baseline_traces(_steps([n for n in nights if n.baseline is not None]), view.unit)
    data += _night_traces(view, page_dir)
    shapes, annotations = [], []
    history = view.history
    if history is not None and history.change_points:
        data += _change_point_traces(view, shapes, annotations)
    if history is not None and history.newest_step is not None:
        step = history.newest_step
        annotations.append({"x": when(trend[-1]), "y": num(trend[-1].value), "xref": "x", "yref": "y", "ax": -40,
                            "ay": -40, "showarrow": True, "arrowcolor": DOWN, "font": {"color": DOWN, "size": 11},
                            "text": f"newest figures start a step of {pct(step.change)}"})
    _rules_marks(nights, shapes, annotations)
    data += _verdict_strip(nights, page_dir)
    layout = {
        "height": 540, "margin": {"l": 70, "r": 24, "t": 30, "b": 50}, "hovermode": "closest",
        "hoverlabel": {"align": "left"}, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.12, "x": 0, "font": {"size": 11}},
        "xaxis": {**_time_axis(nights), "anchor": "y2"},
        "yaxis": {"domain": [0.15, 1], "title": {"text": view.unit or view.measure.label}, "gridcolor": "#eceff1",
                  "zeroline": False},
        "yaxis2": {"domain": [0, 0.07], "range": [-1, 1], "showticklabels": False, "showgrid": False,
                   "zeroline": False, "fixedrange": True, "title": {"text": "verdict", "font": {"size": 10}}},
        "shapes": shapes, "annotations": annotations, "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
    }
    return {"data": data, "layout": layout}


def _rules_marks(nights: Sequence[Night], shapes: list[dict[str, Any]], annotations: list[dict[str, Any]]) -> None:
    """A grey line between two nights judged by different verdict rules (``verdict_rules``), labelled with both:
    the verdicts on either side of it were decided by different rules (docs/verdicts.md, the rules, counted)."""
    for before, after in zip(nights, nights[1:]):
        moved = rules_moved(before.session, after.session)
        if not moved:
            continue
        x = (before.when + (after.when - before.when) / 2).strftime("%Y-%m-%d %H:%M:%S")
        text = f"verdict rules {moved[0]} → {moved[1]}"
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0.13, "y1": 1,
                       "line": {"color": "#757575", "width": 1, "dash": "dot"}})
        annotations.append({"x": x, "y": 0.15, "xref": "x", "yref": "paper", "yanchor": "bottom",
                            "xanchor": "right", "textangle": -90, "showarrow": False,
                            "font": {"color": "#616161", "size": 10}, "text": text,
                            "hovertext": f"{text}: the verdicts on either side were judged by different rules"})


def _baseline_traces(judged: list[Night], unit: str) -> list[dict[str, Any]]:
    """The baseline and its band, over every night that was judged against one (``judged``: where it changes)."""
    if not judged:
        return []
    data: list[dict[str, Any]] = []
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
    return data


def _night_traces(view: CaseView, page_dir: Path) -> list[dict[str, Any]]:
    """The trend's nights with their runs' spread, and the nights off the trend (inconclusive, busy) apart."""
    data: list[dict[str, Any]] = []
    trend = view.trend
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
        off = [n for n in view.nights if n.standing is standing]
        if off:
            data.append({"type": "scatter", "mode": "markers", "name": label, "x": [when(n) for n in off],
                         "y": [num(n.value) for n in off], "marker": {"symbol": symbol, "size": 9, "color": color,
                                                                  "line": {"width": 1.5, "color": color}},
                         "text": [_night_hover(view, n) for n in off],
                         **_clicks(off, page_dir),
                         "hovertemplate": "%{text}<extra></extra>"})
    return data


def _change_point_traces(view: CaseView, shapes: list[dict[str, Any]],
                         annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The level between change points and each change point's marker (its step, interval and what changed on
    hover); each one's line and label go into ``shapes`` and ``annotations``."""
    history, trend, unit = view.history, view.trend, view.unit
    bounds = [0] + [p.step.index for p in history.change_points] + [len(trend)]
    levels = [p.step.before for p in history.change_points] + [history.change_points[-1].step.after]
    xs, ys = [], []
    for n, level in enumerate(levels):
        xs += [when(trend[bounds[n]]), when(trend[bounds[n + 1] - 1]), None]
        ys += [num(level), num(level), None]
    data = [{"type": "scatter", "mode": "lines", "name": "level between change points", "x": xs, "y": ys,
             "line": {"color": "#6d4c41", "width": 1.2, "dash": "dot"}, "hoverinfo": "skip"}]
    marks: dict[str, list[Any]] = {"x": [], "y": [], "text": [], "color": [], "symbol": []}
    for point in history.change_points:
        step = point.step
        color = DOWN if view.measure.regression(step.change) else UP
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
    return data


def _verdict_strip(nights: Sequence[Night], page_dir: Path) -> list[dict[str, Any]]:
    """The verdict of every night, whatever its figure, in a strip below."""
    data = []
    for verdict in list(VERDICTS) + sorted({n.row.verdict for n in nights} - set(VERDICTS)):
        these = [n for n in nights if n.row.verdict == verdict]
        if not these:
            continue
        color, label = verdict_style(verdict)
        data.append({"type": "scatter", "mode": "markers", "name": f"verdict: {label}", "x": [when(n) for n in these],
                     "y": [0] * len(these), "yaxis": "y2", "legendgroup": "verdicts",
                     "marker": {"symbol": ["x" if n.standing is Standing.BUSY else "square" for n in these],
                                "size": 9, "color": color},
                     "text": [_strip_hover(n) for n in these],
                     **_clicks(these, page_dir),
                     "hovertemplate": "%{text}<extra></extra>"})
    return data


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


#: The phases of a step in the order it runs them (pytest_dlperf.worker.phases), each with its colour.
PHASE_COLOURS = (("data", "#8d6e63"), ("compute", "#00897b"), ("forward", "#1e88e5"), ("backward", "#43a047"),
                 ("comm", "#fb8c00"), ("optimizer", "#8e24aa"), ("other", "#b0bec5"))


def phases_figure(view: CaseView) -> dict[str, Any] | None:
    """Where each night's step went: milliseconds a step of each phase, stacked, over the nights that have them
    (the nights' ``phases``); None where none has any."""
    timed = [n for n in view.nights if n.row.phases]
    if not timed:
        return None
    data = []
    for name, colour in PHASE_COLOURS:
        values = [n.row.phases.get(name) for n in timed]
        if not any(values):
            continue
        data.append({"type": "bar", "name": name, "x": [when(n) for n in timed],
                     "y": [num(1000 * v) if v is not None else None for v in values], "marker": {"color": colour},
                     "hovertemplate": f"{name}: %{{y:.3f}} ms a step<extra></extra>"})
    layout = {"height": 300, "barmode": "stack", "margin": {"l": 70, "r": 24, "t": 20, "b": 40},
              "hovermode": "x unified", "legend": {"orientation": "h", "y": -0.2, "x": 0},
              "xaxis": _time_axis(view.nights), "yaxis": {"title": {"text": "ms a step"}, "gridcolor": "#eceff1"},
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
    return link_target(night.links[0].target, night.links[0].is_url, page_dir) if night.links else None
