"""What a pytest session does with its history: check the store before any case, judge cases against their
last N sessions (``--dlperf-baseline-from-history``), append every judged case at the end
(``--dlperf-history``) and fail the session whose newest figures start a downward step
(``--dlperf-history-gate``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import baseline as baseline_mod
from .. import environment
from ..cases import Case, OptionError
from ..gate import drift as gate_drift
from ..gate.evidence import Drift
from ..gate.rules import VERDICT_RULES
from ..results.case import CaseResult, Expected
from ..history import analysis, changepoints, text
from ..history.records import CaseRow, Point, SessionRow, case_rows, machine_class, results_session_row
from ..history.store import StoreError, redact, store_for

if TYPE_CHECKING:
    from ..options import Options

#: The default tolerance of a baseline from history, where --dlperf-tolerance gives none: a baseline file's.
DEFAULT_TOLERANCE = baseline_mod.DEFAULT_TOLERANCE
#: A session analyzes each case's last this many sessions (two months of nightly runs); ``dlperf
#: history`` analyzes them all.  It keeps the end of a session short whatever the store's age.
SESSION_WINDOW = 60
#: A baseline being saved compares its host probes with the median of each case's last this many sessions in
#: the history store (:func:`save_references`).
SAVE_REFERENCE_SESSIONS = 5
#: ``--dlperf-against last-good``: the reference is the commit of the newest night that passed here.
LAST_GOOD = "last-good"


@dataclasses.dataclass
class HistoryBaselines:
    """What a session takes from its history store before any case: per case id, its last N sessions on this
    machine class (``--dlperf-baseline-from-history N``; N 0: none asked for), each case's figures on the trend
    (its drift between sessions, :mod:`pytest_dlperf.gate.drift`) and its last verdicts (a streak of
    inconclusive nights, ``dlperf_inconclusive_nights``)."""

    count: int
    machine: str
    baselines: dict[str, analysis.HistoryBaseline]
    #: On the trend, oldest first: each night's figure and its runs'.
    nights: dict[str, list[tuple[float, tuple[float, ...]]]] = dataclasses.field(default_factory=dict)
    #: Every night's row of each case, oldest first (its verdict, whether it decided, its tolerance).
    verdicts: dict[str, list[CaseRow]] = dataclasses.field(default_factory=dict)
    #: The newest session whose night passed on this machine class (``--dlperf-against last-good``).
    last_good: SessionRow | None = None

    def drift(self, case_id: str, tolerance: float) -> Drift:
        """The case's drift between sessions: its own nights, else its machine class's, else the prior."""
        return gate_drift.drift(self.nights.get(case_id), self.nights, tolerance)

    def inconclusive_streak(self, case_id: str, tolerance: float | None = None) -> int:
        """The case's last nights in a row whose runs decided nothing, judged at ``tolerance`` (None: any).

        A night counts whatever a policy made of it (a night the rule itself failed is still undecided, so the
        rule fails every night after its first failure until a night decides).  Nights of another kind (judged at
        another tolerance, or against no baseline, as a local run or a PR's session) and crashes neither count nor
        break the streak; a decided night ends it."""
        return len(self._streak(case_id, tolerance))

    def _streak(self, case_id: str, tolerance: float | None) -> list[CaseRow]:
        """The case's rows of its streak of undecided nights at ``tolerance`` (None: any), newest first: the nights
        of another kind (another tolerance, no baseline, a crash) skipped, a decided night ending it."""
        rows = []
        for row in reversed(self.verdicts.get(case_id, [])):
            if row.baseline is None or row.verdict == "error" or (
                    tolerance is not None and (row.tolerance is None or
                                               not math.isclose(row.tolerance, tolerance, rel_tol=1e-9))):
                continue
            if not row.undecided:
                break
            rows.append(row)
        return rows

    def undecided_runs(self, case_id: str, tolerance: float, nights: int) -> tuple[tuple[float, ...], ...]:
        """The runs of the case's last ``nights`` undecided nights of its streak (:meth:`inconclusive_streak`),
        oldest first, leaving out a night with a run measured on a busy machine (its runs are not all evidence):
        what the never-deciding rule judges together with tonight's (:mod:`pytest_dlperf.gate.nights`)."""
        kept = [tuple(row.runs) for row in self._streak(case_id, tolerance) if not row.busy_runs and row.runs]
        return tuple(reversed(kept[:nights]))

    def expected(self, case: Case, unit: str, tolerance: float | None) -> Expected | None:
        """The case's expected figure from history: the median of its last N sessions here, judged with the
        tolerance asked for; their figures are the baseline's runs, whose spread the verdict pools."""
        found = self.baselines.get(case.id)
        if found is None:
            return None
        return Expected(found.throughput, unit, tolerance or DEFAULT_TOLERANCE, found.description,
                        figures=found.figures, memory_gbs=found.memory_gbs, core_gflops=found.core_gflops)


def check(options: Options, root: Path) -> HistoryBaselines | None:
    """Before any case: the history options make sense and the store opens (its schema created on first use).

    Returns what the session takes from the store (:class:`HistoryBaselines`): the baselines from history when
    ``--dlperf-baseline-from-history`` asks for them, each case's drift between sessions and its last verdicts.
    Raises :class:`OptionError` with one line naming the option and the problem.
    """
    url = options.history_url
    if not url:
        for flag, value in (("--dlperf-baseline-from-history", options.baseline_from_history),
                            ("--dlperf-history-gate", options.history_gate),
                            (f"--dlperf-against {LAST_GOOD}", options.against == LAST_GOOD)):
            if value:
                raise OptionError(f"{flag}: needs a history store: give --dlperf-history URL")
        return None
    if options.history_gate and (missing := changepoints.missing("--dlperf-history-gate")):
        raise OptionError(missing)
    try:
        with store_for(url).open() as store:
            machine = machine_class(options.device, environment.collect(root), options.machine)
            points = store.points(machine=machine)
            pairs = store.points(machine=machine, ab=True) if options.against == LAST_GOOD else []
    except StoreError as exc:
        raise OptionError(f"--dlperf-history: {exc}") from None
    found = from_points(points, options.baseline_from_history or 0, machine)
    found.last_good = analysis.last_good([*points, *pairs])  # a night of pairs that passed moves it on too
    return found


def from_points(points: list[Point], count: int, machine: str) -> HistoryBaselines:
    """What a session takes from its machine class's ``points`` (oldest first): the baselines of the cases' last
    ``count`` sessions (0: none), their figures on the trend and every night's verdict."""
    nights = {case_id: [(p.case.throughput, tuple(p.case.runs or ())) for p in group]
              for (_, case_id), group in analysis.series(points).items()}
    verdicts: dict[str, list[CaseRow]] = {}
    for point in points:
        verdicts.setdefault(point.case.case_id, []).append(point.case)
    return HistoryBaselines(count, machine, analysis.baselines(points, count) if count else {}, nights, verdicts)


def last_good(history: HistoryBaselines | None, url: str, baseline: str | None = None) -> tuple[str | None, str]:
    """``--dlperf-against last-good``: the commit of the newest night that passed on this machine class
    (:func:`pytest_dlperf.history.analysis.last_good`), and the header's line that says which.  Where no night has
    passed yet, None and the line that says this night is judged against ``baseline`` (``--dlperf-baseline``), so
    that one recipe runs from the first night; without one, raises :class:`OptionError` in one line."""
    found = history.last_good if history is not None else None
    if found is None:
        machine = history.machine if history is not None else "this machine"
        if baseline:
            return None, (f"dlperf: {LAST_GOOD}: no night in {redact(url)} has passed on {machine} yet: this night "
                          f"is judged against {baseline}")
        raise OptionError(f"--dlperf-against {LAST_GOOD}: no night in {redact(url)} passed on {machine} (a clean "
                          "commit, a case passed, none failed); gate the first nights against a baseline "
                          "(--dlperf-baseline) until one does")
    return found.git_commit, (f"dlperf: {LAST_GOOD}: {found.short_commit}, whose night of {found.date} passed on "
                              f"{found.machine} ({redact(url)})")


def save_references(options: Options, root: Path) -> HistoryBaselines | None:
    """With ``--dlperf-save-baseline`` and ``--dlperf-history``: each case's last
    :data:`SAVE_REFERENCE_SESSIONS` sessions on this machine class, read before this session adds its own,
    so that a baseline measured while the host ran slower than in those sessions says so
    (:func:`pytest_dlperf.baseline.slower_host`).  None without either option or without earlier sessions.
    Raises :class:`OptionError` when the store cannot be read."""
    if not (options.save_baseline and options.history_url):
        return None
    try:
        with store_for(options.history_url).open() as store:
            machine = machine_class(options.device, environment.collect(root), options.machine)
            points = store.points(machine=machine)
    except StoreError as exc:
        raise OptionError(f"--dlperf-history: {exc}") from None
    found = analysis.baselines(points, SAVE_REFERENCE_SESSIONS)
    return HistoryBaselines(SAVE_REFERENCE_SESSIONS, machine, found) if found else None


@dataclasses.dataclass
class Recorded:
    """What :func:`record` did, for the terminal summary and the exit status."""

    lines: list[str] = dataclasses.field(default_factory=list)
    gate_failures: list[str] = dataclasses.field(default_factory=list)


def record(opts: Options, device: str, results: list[CaseResult], env: Mapping[str, Any], document: dict[str, Any],
           *, analyze: bool) -> Recorded:
    """Append the session's judged cases (``results``, measured on ``device``) to the store; with ``analyze``, put
    each case's history (trend, change points, newest step) in the results ``document`` and apply the gate.
    Raises OSError."""
    against = document.get("against")
    # The row made from the results document, as `dlperf history import` makes it from the document's file.
    row = results_session_row({**document, "environment": env, "verdict_rules": VERDICT_RULES}, device)
    cases = case_rows(results)
    done = Recorded()
    try:
        with store_for(opts.history_url).open() as store:
            store.append(row, cases)
            if against:  # an A/B session: kept apart, never a night of either side's series
                done.lines.append(f"dlperf: history: {len(cases)} case(s) of this A/B session (against "
                                  f"{row.against}; {row.machine}) written to {store.url}, apart from the nights")
                return done
            if not analyze:
                done.lines.append(f"dlperf: history: {len(cases)} case(s) of this session ({row.machine}) "
                                  f"written to {store.url}")
                return done
            points = store.points(machine=row.machine, case_ids=[c.case_id for c in cases])
    except StoreError as exc:
        raise OSError(str(exc)) from None
    recent = [group[-SESSION_WINDOW:] for _, group in sorted(analysis.series(points).items())]
    histories = [analysis.analyze(group) for group in recent]
    document["history"] = text.document(store.url, histories)
    steps = sum(len(h.change_points) for h in histories)
    done.lines.append(f"dlperf: history: {len(cases)} case(s) of this session ({row.machine}) written to "
                      f"{store.url}; {steps} change point(s) in their history (dlperf history {store.url})")
    for history in histories:
        if history.newest_step is not None and history.points[-1].session.id == row.id:
            done.gate_failures.append(text.gate_line(history, history.newest_step))
    return done
