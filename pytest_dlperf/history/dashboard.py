"""What the history dashboard shows (``dlperf history URL --html DIR``), as typed records.

:func:`case_views` turns the points of a store into one :class:`CaseView` per case and machine
class: every night of it (:class:`Night`) with its standing (a point of the trend, inconclusive,
busy, no figure, a figure that is not finite), the analysis of its trend (change points with what
changed across each, drift, the newest-step gate) and whether a step is *open*. :mod:`.html`
renders them; nothing here knows HTML.

What a case's figure is comes from :data:`MEASURES`: a throughput (higher is better) or, for a
time-to-accuracy case, its time to target (lower is better).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as _dt
import hashlib
import os
import re
import string
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..protocol import ValueEnum
from . import analysis, changepoints
from .analysis import CaseHistory, Findings
from .records import CaseRow, Point, SessionRow, finite

#: Nights in the overview's sparkline.
SPARK_NIGHTS = 30
#: Fewest points of a trend before a change point can be found (three on either side).
MIN_TREND = 2 * changepoints.MIN_SIZE
#: Cases from which the analysis is spread over a process pool (below it, starting one costs more).
POOL_FROM = 24


class Standing(ValueEnum):
    """What a night's figure is to the case's trend."""

    TREND = "trend"  # a point of the trend
    INCONCLUSIVE = "inconclusive"  # measured, but the verdict decided nothing
    BUSY = "busy"  # every run measured on a busy machine: the figure is the machine's
    NO_FIGURE = "no figure"  # crashed, or a time-to-accuracy run that kept no time
    NOT_FINITE = "not finite"  # an infinity or NaN in the store (an old row)


class StepState(ValueEnum):
    """Whether a case's trend has an open step: a regression that is still its level, or starting now."""

    NONE = "none"  # no change point
    OPEN = "open"  # its last change point is a regression: the level since is the worse one
    NEWEST = "newest"  # its newest figures start a downward step (what --dlperf-history-gate fails)
    CLOSED = "closed"  # its last change point is an improvement


@dataclasses.dataclass(frozen=True)
class Measure:
    """What a case's figure is: which field of a row, in which direction it is better."""

    key: str
    label: str
    higher_is_better: bool
    value: Callable[[CaseRow], float | None]
    unit: Callable[[CaseRow], str]

    def regression(self, change: float) -> bool:
        """Whether a relative change of the figure is for the worse."""
        return change < 0 if self.higher_is_better else change > 0


def _target(row: CaseRow) -> str:
    target = row.case.get("target") or {}
    return f"s to {target.get('metric', 'target')} {target.get('value', '')}".rstrip()


#: The figures a case can have, by key: a throughput, or a time-to-accuracy case's time to target.
MEASURES: dict[str, Measure] = {
    "throughput": Measure("throughput", "throughput", True, lambda row: row.throughput,
                          lambda row: row.unit or ""),
    "time-to-target": Measure("time-to-target", "time to target", False, lambda row: row.time_to_target, _target),
}


def measure_of(rows: Iterable[CaseRow]) -> Measure:
    """A case's measure: time to target for a case with a target, else throughput."""
    rows = list(rows)
    if any(row.case.get("target") or row.time_to_target is not None for row in rows):
        return MEASURES["time-to-target"]
    return MEASURES["throughput"]


# --------------------------------------------------------------------------- links


class LinkError(ValueError):
    """A link pattern that cannot be used; the message names the option and what is expected."""


def _date(session: SessionRow) -> str:
    return utc(session.created).strftime("%Y-%m-%d")


#: The placeholders of a link pattern: what each becomes for a night (a session) of a case.
PLACEHOLDERS: dict[str, Callable[[SessionRow, str], str | None]] = {
    "session": lambda s, case: s.id,
    "date": lambda s, case: _date(s),
    "time": lambda s, case: utc(s.created).strftime("%H%M%S"),
    "created": lambda s, case: s.created,
    "commit": lambda s, case: s.git_commit,
    "short_commit": lambda s, case: s.short_commit,
    "branch": lambda s, case: s.git_branch,
    "host": lambda s, case: s.hostname,
    "machine": lambda s, case: s.machine,
    "case": lambda s, case: case,
}
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclasses.dataclass(frozen=True)
class LinkPattern:
    """``LABEL=PATTERN``: where a night's report or results were kept, a URL or a path with placeholders."""

    label: str
    pattern: str

    @classmethod
    def parse(cls, text: str, option: str) -> LinkPattern:
        """``report=https://ci.example.org/nightly/{date}/report.md``; :class:`LinkError` in one line."""
        label, sep, pattern = text.partition("=")
        label, pattern = label.strip(), pattern.strip()
        if not sep or not label or not pattern:
            raise LinkError(f"{option}: {text!r} is not LABEL=PATTERN; expected e.g. "
                            "report=https://ci.example.org/nightly/{date}/report.md or results=nights/{session}/"
                            "results.json")
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(pattern) if field is not None]
        except ValueError as exc:
            raise LinkError(f"{option}: {text!r}: {exc}; a literal brace is written {{{{ or }}}}") from None
        unknown = [field for field in fields if field not in PLACEHOLDERS]
        if unknown:
            raise LinkError(f"{option}: {text!r}: unknown placeholder {{{unknown[0]}}}; expected "
                            f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        return cls(label, pattern)

    @property
    def is_url(self) -> bool:
        return bool(_URL.match(self.pattern))

    def expand(self, session: SessionRow, case_id: str) -> str | None:
        """The pattern for a night, or None where a placeholder it uses has no value for that session."""
        values = {}
        for name, value_of in PLACEHOLDERS.items():
            value = value_of(session, case_id)
            values[name] = None if value is None else (urllib.parse.quote(value, safe="") if self.is_url else value)
        fields = {field for _, field, _, _ in string.Formatter().parse(self.pattern) if field}
        if any(values[field] in (None, "") for field in fields):
            return None
        return self.pattern.format(**values)


@dataclasses.dataclass(frozen=True)
class Link:
    label: str
    target: str  # a URL, or the path of a file that exists (absolute)
    is_url: bool


def night_links(patterns: Sequence[LinkPattern], session: SessionRow, case_id: str,
                exists: Callable[[Path], bool] = Path.exists) -> tuple[Link, ...]:
    """A night's links: each URL pattern, and each path pattern whose file was kept."""
    out = []
    for pattern in patterns:
        target = pattern.expand(session, case_id)
        if target is None:
            continue
        if pattern.is_url:
            out.append(Link(pattern.label, target, True))
            continue
        path = Path(os.path.expanduser(target))
        if exists(path):
            out.append(Link(pattern.label, str(path.resolve()), False))
    return tuple(out)


# --------------------------------------------------------------------------- nights and cases


def utc(created: str) -> _dt.datetime:
    """A session's ``created`` as a UTC datetime (one without a zone is taken as UTC)."""
    try:
        when = _dt.datetime.fromisoformat(created)
    except ValueError:
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return when.replace(tzinfo=_dt.timezone.utc) if when.tzinfo is None else when.astimezone(_dt.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Night:
    """One session of a case: its figure and what it is to the trend, its verdict and why, its links."""

    point: Point
    standing: Standing
    value: float | None  # the measure's figure, finite, or None
    raw: float | None  # the stored figure, which for NOT_FINITE is an infinity or NaN
    links: tuple[Link, ...] = ()

    # Worked out once, in __post_init__: a site reads each of them several times for every night of every case.
    session: SessionRow = dataclasses.field(init=False, repr=False, compare=False)
    row: CaseRow = dataclasses.field(init=False, repr=False, compare=False)
    when: _dt.datetime = dataclasses.field(init=False, repr=False, compare=False)  # the session's time, UTC
    stamp: str = dataclasses.field(init=False, repr=False, compare=False)  # as a chart's axis reads it
    runs: tuple[float, ...] = dataclasses.field(init=False, repr=False, compare=False)  # the finite run medians
    baseline: float | None = dataclasses.field(init=False, repr=False, compare=False)
    tolerance: float | None = dataclasses.field(init=False, repr=False, compare=False)
    #: The figure against the baseline it was judged against: figure / baseline - 1.
    change: float | None = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        row = self.point.case
        when = utc(self.point.session.created)
        baseline = row.baseline if finite(row.baseline) and row.baseline > 0 else None
        for name, value in (
                ("session", self.point.session), ("row", row), ("when", when),
                ("stamp", when.strftime("%Y-%m-%d %H:%M:%S")), ("runs", tuple(r for r in row.runs if finite(r))),
                ("baseline", baseline), ("tolerance", row.tolerance if finite(row.tolerance) else None),
                ("change", None if self.value is None or baseline is None else self.value / baseline - 1)):
            object.__setattr__(self, name, value)


@dataclasses.dataclass(frozen=True)
class CaseView:
    """One case on one machine class: every night of it, and what its trend shows."""

    key: str  # a stable file name: the case page's permalink
    case_id: str
    machine: str
    measure: Measure
    unit: str
    case: Mapping[str, Any]  # model, precision, batch_size, gpus, settings (target, recipe)
    nights: tuple[Night, ...]
    history: CaseHistory | None  # the trend's analysis; None without a point of the trend

    @property
    def trend(self) -> list[Night]:
        return [n for n in self.nights if n.standing is Standing.TREND]

    @property
    def latest(self) -> Night:
        return self.nights[-1]

    @property
    def latest_figure(self) -> Night | None:
        """The newest night with a figure (the latest may have crashed)."""
        return next((n for n in reversed(self.nights) if n.value is not None), None)

    @property
    def state(self) -> StepState:
        history = self.history
        if history is None:
            return StepState.NONE
        if history.newest_step is not None:
            return StepState.NEWEST
        if not history.change_points:
            return StepState.NONE
        last = history.change_points[-1].step
        return StepState.OPEN if self.measure.regression(last.change) else StepState.CLOSED

    @property
    def open_step(self) -> changepoints.Step | None:
        """The step that makes the state open or newest, or None."""
        if self.state is StepState.NEWEST:
            return self.history.newest_step
        if self.state is StepState.OPEN:
            return self.history.change_points[-1].step
        return None

    def count(self, standing: Standing) -> int:
        return sum(1 for n in self.nights if n.standing is standing)

    @property
    def notes(self) -> list[str]:
        """What a reader must know to read the page right: too few nights, nights left out of the trend."""
        out = []
        trend = len(self.trend)
        if trend == 0:
            out.append("no night of this case has a figure that is a point of its trend, so there is no trend yet")
        elif trend < MIN_TREND:
            out.append(f"{trend} night(s) on the trend: change points need at least {MIN_TREND} "
                       f"({changepoints.MIN_SIZE} on either side of a step)")
        for standing, what in ((Standing.INCONCLUSIVE, "inconclusive: its verdict decided nothing"),
                               (Standing.BUSY, "busy: every run measured on a busy machine"),
                               (Standing.NO_FIGURE, "without a figure (the case crashed or kept no time)")):
            count = self.count(standing)
            if count:
                out.append(f"{count} night(s) {what}; marked as such, not points of the trend")
        bad = [n for n in self.nights if n.standing is Standing.NOT_FINITE]
        if bad:
            kinds = sorted({repr(n.raw) for n in bad})
            out.append(f"{len(bad)} night(s) with a figure that is not a finite number in the store "
                       f"({', '.join(kinds)}): left out of the trend")
        return out


def case_key(machine: str, case_id: str) -> str:
    """A case page's file name, the same in every build: readable, and unique by a hash of both names."""
    digest = hashlib.sha256(f"{machine}\0{case_id}".encode()).hexdigest()[:10]
    text = re.sub(r"[^A-Za-z0-9_.+=-]+", "-", f"{case_id}--{machine}").strip("-.")[:80]
    return f"{text}-{digest}"


def _night(point: Point, measure: Measure, links: tuple[Link, ...]) -> Night:
    row = point.case
    raw = measure.value(row)
    if raw is None:
        return Night(point, Standing.NO_FIGURE, None, None, links)
    if not finite(raw):
        return Night(point, Standing.NOT_FINITE, None, raw, links)
    if row.busy:  # the more telling of the two: why such a night decided nothing
        return Night(point, Standing.BUSY, float(raw), raw, links)
    if row.verdict == "inconclusive":
        return Night(point, Standing.INCONCLUSIVE, float(raw), raw, links)
    return Night(point, Standing.TREND, float(raw), raw, links)


def _findings(job: tuple[list[float], float, bool]) -> Findings:
    values, alpha, gate = job
    return analysis.findings(values, alpha=alpha, gate=gate)


def _all_findings(jobs: list[tuple[list[float], float, bool]], workers: int | None) -> list[Findings]:
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers <= 1 or len(jobs) < POOL_FROM:
        return [_findings(job) for job in jobs]
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(_findings, jobs, chunksize=max(1, len(jobs) // (4 * workers))))


def case_views(points: Iterable[Point], *, alpha: float = changepoints.ALPHA, links: Sequence[LinkPattern] = (),
               last: int | None = None, select: Callable[[str, str], bool] | None = None,
               workers: int | None = None) -> list[CaseView]:
    """One view per (machine class, case id), sorted by both: every night, oldest first, and its analysis.

    ``last``: only each case's last N nights; ``select(machine, case_id)``: only the cases it takes;
    ``workers``: processes for the analysis (default: one per CPU, for many cases).
    """
    groups: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        groups.setdefault((point.session.machine, point.case.case_id), []).append(point)
    keys = [key for key in sorted(groups) if select is None or select(*key)]
    views, jobs = [], []
    for machine, case_id in keys:
        group = groups[(machine, case_id)][-last:] if last else groups[(machine, case_id)]
        measure = measure_of(p.case for p in group)
        nights = tuple(_night(p, measure, night_links(links, p.session, case_id)) for p in group)
        views.append((machine, case_id, measure, nights))
        trend = [n.value for n in nights if n.standing is Standing.TREND]
        jobs.append((trend, alpha, measure.higher_is_better))
    found = _all_findings(jobs, workers)
    out = []
    for (machine, case_id, measure, nights), findings in zip(views, found):
        trend = [n for n in nights if n.standing is Standing.TREND]
        history = None
        if trend:
            history = analysis.analyze([n.point for n in trend], alpha=alpha, values=[n.value for n in trend],
                                       gate=measure.higher_is_better, found=findings)
        newest = nights[-1].row
        unit = next((measure.unit(n.row) for n in reversed(nights) if measure.unit(n.row)), "")
        out.append(CaseView(case_key(machine, case_id), case_id, machine, measure, unit, newest.case, nights,
                            history))
    return out
