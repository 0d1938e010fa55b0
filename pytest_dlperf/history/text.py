"""The history as text: ``dlperf history``'s lines, the results document's ``history`` and its Markdown section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .analysis import TREND_LENGTH, CaseHistory, ChangePoint
from .changepoints import Step
from .records import SessionRow

BARS = "▁▂▃▄▅▆▇█"


def sparkline(figures: Sequence[float]) -> str:
    """The figures as block characters, lowest to highest."""
    low, high = min(figures), max(figures)
    if high == low:
        return BARS[3] * len(figures)
    return "".join(BARS[min(len(BARS) - 1, int((f - low) / (high - low) * len(BARS)))] for f in figures)


def figure_text(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def change_line(history: CaseHistory, point: ChangePoint) -> str:
    step, session = point.step, point.session
    commit = f", git {session.short_commit}" if session.short_commit else ""
    changes = "; ".join(point.changes) or "no environment difference recorded"
    return (f"change point at session {step.index + 1} of {len(history.points)} ({session.date} UTC{commit}): "
            f"{step.describe()}, {figure_text(step.before)} -> {figure_text(step.after)} {history.unit or ''}".rstrip()
            + f"; {changes}")


def gate_line(history: CaseHistory, step: Step) -> str:
    count = len(history.points) - step.index
    newest = "the newest figure starts" if count == 1 else f"the newest {count} figures start"
    return (f"{history.case_id} on {history.machine}: {newest} a downward step of {step.describe()} "
            f"from {figure_text(step.before)} to {figure_text(step.after)} {history.unit or ''}".rstrip())


def rules_moved(before: SessionRow, after: SessionRow) -> tuple[str, str] | None:
    """The verdict rules (``verdict_rules``, written since store schema 7) of two sessions in a row, where they
    differ (an older session's: 'unrecorded'): the verdicts on either side were judged by different rules."""
    if before.verdict_rules == after.verdict_rules:
        return None
    return str(before.verdict_rules or "unrecorded"), str(after.verdict_rules or "unrecorded")


def rules_lines(history: CaseHistory) -> list[str]:
    """Where the verdict's rules changed between two of the case's sessions (:func:`rules_moved`)."""
    out, points = [], history.points
    for index in range(1, len(points)):
        moved = rules_moved(points[index - 1].session, points[index].session)
        if moved:
            out.append(f"verdict rules {moved[0]} -> {moved[1]} at session {index + 1} of "
                       f"{len(points)} ({points[index].session.date} UTC): the verdicts on either side were judged "
                       "by different rules")
    return out


def case_lines(history: CaseHistory) -> list[str]:
    figures = history.figures
    last = figures[-TREND_LENGTH:]
    lines = [f"{history.case_id} on {history.machine}: {len(figures)} session(s), {history.unit or ''}".rstrip(),
             f"  last {len(last)}: {sparkline(last)}  {' '.join(figure_text(f) for f in last)}"]
    lines += [f"  {line}" for line in rules_lines(history)]
    lines += [f"  {change_line(history, point)}" for point in history.change_points]
    if not history.change_points:
        lines.append("  no change point")
    if history.drifting:
        lines.append(f"  drift: {history.trend.describe()}")
    if history.newest_step is not None:
        lines.append(f"  gate: {gate_line(history, history.newest_step)}")
    return lines


def _step_dict(step: Step) -> dict[str, Any]:
    return {"index": step.index, "before": step.before, "after": step.after, "change": step.change,
            "low": step.low, "high": step.high, "pvalue": step.pvalue}


def document(store: str, histories: Sequence[CaseHistory]) -> dict[str, Any]:
    """The results document's ``history`` (``schemas/results.schema.json``)."""
    cases = []
    for h in histories:
        cases.append({
            "id": h.case_id, "machine": h.machine, "unit": h.unit, "sessions": len(h.points),
            "last": h.figures[-TREND_LENGTH:],
            "change_points": [{**_step_dict(p.step), "session": p.session.id, "created": p.session.created,
                               "environment": list(p.changes)} for p in h.change_points],
            "drift": None if not h.drifting else {"total": h.trend.total, "slope": h.trend.slope,
                                                  "pvalue": h.trend.pvalue, "sessions": h.trend.count},
            "newest_step": None if h.newest_step is None else _step_dict(h.newest_step),
        })
    return {"store": store, "cases": cases}


def _pct(value: float) -> str:
    return f"{100 * value:+.1f}%"


def markdown_section(history: Mapping[str, Any] | None) -> list[str]:
    """The report's "History" section, from the results document's ``history``; none without one."""
    if not history:
        return []
    intro = (f"Every session of this machine class in `{history['store']}`: the last figures of each case, and "
             "the change points found in them (E-divisive: ruptures' binary segmentation, a permutation test, "
             "Welch's 95% interval of the step).")
    lines = ["## History", "", intro, "",
             "| case | sessions | last figures | change points | drift |", "|---|---|---|---|---|"]
    for case in history["cases"]:
        points = "<br>".join(
            f"session {p['index'] + 1} ({p['created'][:10]}): {_pct(p['change'])} [{_pct(p['low'])}, "
            f"{_pct(p['high'])}], p={p['pvalue']:.3g}; {', '.join(p['environment']) or 'same environment'}"
            for p in case["change_points"]) or "none"
        if case.get("newest_step"):
            points += f"<br>**newest figures start a step of {_pct(case['newest_step']['change'])}**"
        drift = "" if not case.get("drift") else f"{_pct(case['drift']['total'])} over {case['drift']['sessions']}"
        last = " ".join(figure_text(f) for f in case["last"])
        lines.append(f"| {case['id']} ({case['machine']}) | {case['sessions']} | {sparkline(case['last'])} {last} | "
                     f"{points} | {drift} |")
    return lines + [""]
