"""What a case's history shows: its series per machine class, change points with the environment
difference across each, its trend; and a baseline made of its last N sessions.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence

from . import changepoints
from .changepoints import Step, Trend
from .records import Point, SessionRow, environment_changes

#: Figures in a compact trend line.
TREND_LENGTH = 10
#: The trend test looks at the newest figures since the last change point, at most this many.
TREND_WINDOW = 20


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A step of a case's series, the session after it, and what changed across it."""

    step: Step
    session: SessionRow  # the first session after the change
    previous: SessionRow  # the last session before it
    changes: tuple[str, ...]  # "torch 2.13.0 -> 2.14.1", "git 3fa2c1e..9b04d7e"


@dataclasses.dataclass(frozen=True)
class CaseHistory:
    """One case on one machine class: its figures, oldest first, and what they show."""

    case_id: str
    machine: str
    unit: str | None
    points: tuple[Point, ...]
    change_points: tuple[ChangePoint, ...]
    trend: Trend | None  # since the last change point (at most TREND_WINDOW figures)
    newest_step: Step | None  # --dlperf-history-gate's finding
    #: The figures analyzed, one per point: the throughput, or another figure of the case (its time to target).
    values: tuple[float, ...] = ()

    @property
    def figures(self) -> list[float]:
        return list(self.values) if self.values else [p.case.throughput for p in self.points]

    @property
    def drifting(self) -> bool:
        return self.trend is not None and self.trend.pvalue <= changepoints.ALPHA


def series(points: Iterable[Point]) -> dict[tuple[str, str], list[Point]]:
    """The points of each case's trend grouped by (machine class, case id), oldest first: measured figures,
    decided or not, less the nights whose every run was busy (:attr:`~.records.CaseRow.on_trend`)."""
    out: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        if point.case.on_trend:
            out.setdefault((point.session.machine, point.case.case_id), []).append(point)
    return out


@dataclasses.dataclass(frozen=True)
class Findings:
    """What a series of figures shows, before it is tied to its sessions: its steps, trend and newest step."""

    steps: tuple[Step, ...]
    trend: Trend | None  # since the last change point (at most TREND_WINDOW figures)
    newest_step: Step | None


def findings(figures: Sequence[float], *, alpha: float = changepoints.ALPHA, gate: bool = True) -> Findings:
    """The change points, trend and (with ``gate``) newest downward step of a series of figures.

    Plain numbers in and out, so that a process pool can work out many series at once."""
    steps = changepoints.find(figures, alpha=alpha)
    start = steps[-1].index if steps else 0
    recent = figures[max(start, len(figures) - TREND_WINDOW):]
    newest = changepoints.newest_step(figures, alpha=alpha, steps=steps) if gate else None
    return Findings(tuple(steps), changepoints.trend(recent), newest)


def analyze(points: Sequence[Point], *, alpha: float = changepoints.ALPHA, values: Sequence[float] | None = None,
            gate: bool = True, found: Findings | None = None) -> CaseHistory:
    """Change points, trend and newest step of one case's series (one machine class).

    ``values``: another figure of each point than its throughput (a time-to-accuracy case's time to
    target); ``gate=False`` looks for no newest downward step (where a drop is no regression);
    ``found``: the :func:`findings` of those figures, where they were worked out already.
    """
    figures = [p.case.throughput for p in points] if values is None else [float(v) for v in values]
    found = found if found is not None else findings(figures, alpha=alpha, gate=gate)
    marked = []
    for step in found.steps:
        after, before = points[step.index].session, points[step.index - 1].session
        marked.append(ChangePoint(step, after, before, tuple(environment_changes(before, after))))
    first = points[0]
    return CaseHistory(first.case.case_id, first.session.machine, first.case.unit, tuple(points), tuple(marked),
                       found.trend, found.newest_step, tuple(figures))


@dataclasses.dataclass(frozen=True)
class HistoryBaseline:
    """``--dlperf-baseline-from-history N``: a case's expected figure from its last sessions here."""

    throughput: float  # the median of ``figures``
    figures: tuple[float, ...]  # the last N sessions' figures, oldest first
    description: str  # "history: last 8 sessions on AMD EPYC, 2 CPUs (2026-11-01 .. 2026-11-23)"
    memory_gbs: float | None = None  # the median of those sessions' memory probes, where they kept one
    core_gflops: float | None = None  # the median of those sessions' core probes, where they kept one


def baselines(points: Iterable[Point], count: int) -> dict[str, HistoryBaseline]:
    """Per case id, the baseline of its last ``count`` measured sessions (points of one machine class)."""
    out = {}
    for (machine, case_id), group in series(points).items():
        last = group[-count:]
        figures = tuple(p.case.throughput for p in last)
        span = f"{last[0].session.created[:10]} .. {last[-1].session.created[:10]}"
        probes = {key: [getattr(p.case, key) for p in last if getattr(p.case, key)]
                  for key in ("memory_gbs", "core_gflops")}
        out[case_id] = HistoryBaseline(statistics.median(figures), figures,
                                       f"history: last {len(last)} session(s) on {machine} ({span})",
                                       *(statistics.median(v) if v else None for v in probes.values()))
    return out


#: A night that failed nothing: no case of it failed or crashed.
FAILING_VERDICTS = ("fail", "error")
#: ... and judged something: at least one case passed or improved against its reference.
PASSING_VERDICTS = ("pass", "improved")


def last_good(points: Iterable[Point]) -> SessionRow | None:
    """The newest session of ``points`` whose night passed (``--dlperf-against last-good``): its commit known and
    clean (no ``+dirty``), at least one case passed or improved and none failed or crashed.  An A/B night counts
    (its candidate passed against the last good one before it), so each night that passes moves it on."""
    verdicts: dict[str, list[str]] = {}
    sessions: dict[str, SessionRow] = {}
    for point in points:
        sessions[point.session.id] = point.session
        verdicts.setdefault(point.session.id, []).append(point.case.verdict)
    good = [s for s in sessions.values()
            if s.git_commit and not s.git_commit.endswith("+dirty")
            and not any(v in FAILING_VERDICTS for v in verdicts[s.id])
            and any(v in PASSING_VERDICTS for v in verdicts[s.id])]
    return max(good, key=lambda s: s.created, default=None)
