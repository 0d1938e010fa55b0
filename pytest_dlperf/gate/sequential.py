"""The sequential verdict: measure one fresh run at a time until the evidence decides, or the budget ends.

:func:`measure_until_decided` runs ``--dlperf-runs`` runs, then after each run (a *look*) estimates the
case from the runs that are evidence (:mod:`.evidence`, with the drift between sessions of :mod:`.drift`) and
stops when it decides (regression, pass, improved) or the budget is spent: ``--dlperf-max-runs`` runs (never a
time: a time budget gives a slower build fewer runs, issue 53).  The looks are paid for: a
regression's boundary is that of the look among those the budget plans (:mod:`.looks`), so that all of them
together fail a case exactly at its threshold at most 1% of the time.  A run measured on a busy machine (a
cause the message names, measured outside the case's processes: other processes on the saturated CPUs, steal,
another process on the GPU, throttling; ``dlperf_max_interference``) is no evidence: the next run starts
after a short wait, and a second busy run in a row ends the case, inconclusive (busy), rather than measuring
a busy machine up to the budget.  A case still undecided at the budget is *inconclusive*.

A baseline being saved measures :data:`SAVE_RUNS` counted runs unless ``--dlperf-runs`` says how
many: its runs' spread is what every later verdict against it pools with its own.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from ..results.case import Expected
from ..results.runs import Attempt
from . import evidence as ev
from . import far, host
from . import figures as fig
from .drift import prior as prior_drift
from .evidence import Evidence, StopReason

#: The longest wait before the run after a busy one (never longer than that run took).
BUSY_WAIT = 5.0
#: Busy runs in a row that end a case as inconclusive (busy): a host that is busy now stays busy for a while.
BUSY_RUNS = 2
#: Counted runs a baseline being saved measures where ``--dlperf-runs`` does not say: its spread is pooled by
#: every later verdict, and with fewer runs its own uncertainty keeps an unchanged case from passing on a host
#: whose runs vary 5-7% (benchmarks/verdict_simulation.py).
SAVE_RUNS = 10
#: Seconds over which a baseline being saved starts its counted runs, at the least (``dlperf_save_span``): its
#: figure and its spread, which every later verdict pools, must sample the host over time, not one moment of it.
#: Measured (docs/verdicts.md, 2026-11-26, ``vq`` on one thread): fresh interpreters spread a save's 10 runs
#: over 58 s (CV 4.6%) and 0 of 20 later unchanged sessions failed; the fork server took them in 15 s (CV 1.3%)
#: and 3 of 20 failed, 9.5-17% below it, in minutes when the host ran slower.  Runs that take longer than
#: ``span / (runs - 1)`` (GPU cases, as a rule) are not slowed.
SAVE_SPAN = 60.0
#: Quiet runs a baseline entry needs (or all those asked for, where --dlperf-runs asks fewer): a figure from fewer
#: is one moment of a host that was busy around it, and would judge every later session against that moment.
MIN_SAVED_RUNS = 3


def unsaved_reason(evidence: Evidence, wanted: int) -> str | None:
    """Why a case measured for a baseline must not be saved (too few of its runs measured a quiet machine), or
    None.  It needs ``min(wanted, MIN_SAVED_RUNS)`` quiet runs."""
    need = min(wanted, MIN_SAVED_RUNS)
    quiet = len(evidence.counted)
    if quiet >= need:
        return None
    last = next((f.busy for f in reversed(evidence.busy) if f.busy), None)
    cause = f" (the last busy one: {last})" if last else ""
    return (f"not saved as a baseline: {quiet} of its {len(evidence.figures)} runs measured a quiet machine, "
            f"and an entry needs {need}{cause}: save it again when the machine is quiet, or count busy runs with "
            f"dlperf_max_interference off")


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much measuring a case may take, and what counts as a busy machine."""

    first_runs: int = 1  # --dlperf-runs: runs before the first decision
    max_runs: int = 10  # --dlperf-max-runs
    max_interference: float | None = fig.MAX_INTERFERENCE  # dlperf_max_interference; None: off
    max_bandwidth_drop: float | None = fig.MAX_BANDWIDTH_DROP  # the memory probe named beyond it (None: off, GPUs)
    max_core_drop: float | None = fig.MAX_CORE_DROP  # the core probe, likewise
    planned: int | None = None  # the looks planned (a replay's budget stops at its kept runs): max_runs's

    @property
    def looks(self) -> int:
        """The looks a case plans: one after each of its runs from the ``first_runs``-th to ``max_runs``."""
        return max(1, (self.planned or self.max_runs) - self.first_runs + 1)

    def look(self, counted: int) -> int:
        """Which look ``counted`` evidence runs are (1-based)."""
        return max(1, counted - self.first_runs + 1)

    @property
    def probe_drops(self) -> dict[str, float | None]:
        return {fig.MEMORY.key: self.max_bandwidth_drop, fig.CORE.key: self.max_core_drop}


def offsets_of(expected: Expected | None) -> float:
    """The session offsets a case's estimate carries against ``expected``: a baseline from history is sessions'
    figures, whose spread carries the offsets (1: tonight's); a file's is one session's (2: tonight's and the
    save's)."""
    return 1.0 if expected is not None and expected.figures else 2.0


def assess(figures: Sequence[fig.RunFigure], expected: Expected | None, baseline_runs: Sequence[float],
           tolerance: float, drift: ev.Drift | None = None,
           budget: Budget = Budget()) -> tuple[ev.Estimate | None, ev.Decision, bool]:
    """The estimate from the runs that are evidence, what it decides (no baseline: pass), and whether the busy
    runs are in it.  ``drift``: the drift between sessions in the interval (None: the prior); ``budget``: its looks.

    A busy run is no evidence of a regression, but the slowness it shows is the machine's: it
    measured at most what the case gives on a quiet machine.  So where the evidence runs alone
    leave the case undecided (or there are none) and the interval from all runs together,
    busy ones included, lies above the threshold (pass, or improved), the quiet case's figure
    lies above it too.
    """
    values = [f.value for f in figures if not f.busy and not f.far]
    if not values and expected is None:
        # Nothing to judge, so no false alarm to avoid: not re-measured (the message says the runs were busy).
        values = [f.value for f in figures if not f.far]
    base = expected.throughput if expected is not None else None
    runs = baseline_runs if base is not None else ()
    estimate, decision = None, ev.Decision.UNDECIDED
    offsets = offsets_of(expected)
    drift = prior_drift(tolerance) if drift is None else drift
    if values:
        estimate = ev.estimate(values, tolerance, base, runs, drift=drift, offsets=offsets)
        decision = ev.decide(estimate, tolerance, look=budget.look(len(values)), looks=budget.looks)
    if base is not None and decision is ev.Decision.UNDECIDED and any(f.busy for f in figures):
        with_busy = ev.estimate([f.value for f in figures if not f.far], tolerance, base, runs, drift=drift,
                                offsets=offsets)
        if ev.decide(with_busy, tolerance) in (ev.Decision.PASS, ev.Decision.IMPROVED):
            return with_busy, ev.decide(with_busy, tolerance), True
    return estimate, decision, False


def evidence_now(figures: Sequence[fig.RunFigure], expected: Expected | None, baseline_runs: Sequence[float],
                 tolerance: float, drift: ev.Drift | None, budget: Budget, notes: list[str],
                 probe_runs: Mapping[str, Sequence[float]] | None = None) -> tuple[Evidence, bool]:
    """The runs so far as evidence (:func:`assess`, then :func:`judged_both_ways` where the host moved), and whether
    the runs as measured and on the host's scale contradict each other."""
    estimate, decision, busy_counted = assess(figures, expected, baseline_runs, tolerance, drift, budget)
    decision, contradicted, move = judged_both_ways(figures, expected, baseline_runs, tolerance, drift, budget,
                                                    decision, probe_runs)
    notes = [move.line(), *notes] if move else notes
    return Evidence(list(figures), estimate, decision, StopReason.DECIDED, busy_counted, notes,
                    moved=move.ratio if move else None), contradicted


def judged_both_ways(figures: Sequence[fig.RunFigure], expected: Expected | None, baseline_runs: Sequence[float],
                     tolerance: float, drift: ev.Drift | None, budget: Budget, decision: ev.Decision,
                     probe_runs: Mapping[str, Sequence[float]] | None = None
                     ) -> tuple[ev.Decision, bool, host.Move | None]:
    """Where the host moved since the save (:mod:`.host`: the controller's probe either way, else the runs' own
    probes, faster): the decision of the runs as measured and on the host's scale together, whether the two
    contradict, and the host's move; else ``decision`` as it is.  ``probe_runs``: the baseline's runs' probe
    readings, by key (their spread)."""
    if expected is None:
        return decision, False, None
    move = (host.moved(figures, expected.host_runs, tolerance)
            or host.probes_faster(figures, probe_references(expected), probe_runs, budget.probe_drops, tolerance))
    if move is None:
        return decision, False, None
    scaled = [dataclasses.replace(f, value=f.value / move.ratio) for f in figures]
    decision, contradicted = host.combined(decision, assess(scaled, expected, baseline_runs, tolerance, drift,
                                                            budget)[1])
    return decision, contradicted, move


#: Evidence runs a regression needs before it is declared (while the run budget allows them): one fresh run can be
#: an outlier the normal model of the others does not foresee (measured here: one unchanged run 25% below a
#: baseline whose five runs spread 9%).
REGRESSION_RUNS = 2


def out_of_budget(evidence: Evidence, unconfirmed: bool, why: StopReason) -> Evidence:
    """The evidence when the budget ends (``why``): undecided; a regression that fewer than
    :data:`REGRESSION_RUNS` evidence runs show (the others busy, or a budget of one run) is marked
    ``unconfirmed``: its verdict fails, saying so and why the runs stopped."""
    evidence.stopped = why
    if unconfirmed:
        evidence.decision = ev.Decision.UNDECIDED
        evidence.unconfirmed = True
    return evidence


def far_ended(figures: Sequence[fig.RunFigure], runs: int, budget: Budget) -> bool:
    """Whether the case's last runs, cut short far off its baseline, end it: :data:`.far.FAR_RUNS` in a row, or
    fewer where the budget allows no more runs."""
    streak = far.far_streak([f.far for f in figures])
    return bool(streak) and (streak >= far.FAR_RUNS or runs >= budget.max_runs)


def far_off(figures: Sequence[fig.RunFigure], expected: Expected, baseline_runs: Sequence[float],
            drift: ev.Drift | None) -> Evidence:
    """The evidence of a case whose last runs were cut short far off its baseline (:mod:`.far`): a regression, its
    estimate from those runs' paces."""
    streak = far.far_streak([f.far for f in figures])
    paces = [f.value for f in figures[-streak:]]
    tolerance = expected.tolerance
    estimate = ev.estimate(paces, tolerance, expected.throughput, baseline_runs,
                           drift=prior_drift(tolerance) if drift is None else drift,
                           offsets=offsets_of(expected))
    return Evidence(list(figures), estimate, ev.Decision.REGRESSION, StopReason.FAR_OFF)


def probe_references(expected: Expected | None) -> dict[str, float | None]:
    """The baseline's host probe figures, by :attr:`~.figures.HostProbe.key` (None each without a baseline)."""
    return {probe.key: getattr(expected, probe.key, None) if expected is not None else None
            for probe in fig.HOST_PROBES}


def measure_until_decided(measure_one: Callable[[int], Attempt], expected: Expected | None,
                          baseline_runs: Sequence[float], budget: Budget,
                          more: Callable[[Attempt, Evidence], bool] = lambda attempt, evidence: False,
                          sleep: Callable[[float], None] = time.sleep, counted_runs: int = 0,
                          probe_runs: Mapping[str, Sequence[float]] | None = None, spacing: float = 0.0,
                          clock: Callable[[], float] = time.monotonic,
                          drift: ev.Drift | None = None) -> tuple[Attempt, Evidence]:
    """Measure ``measure_one(index)`` (one fresh run each) until decided or out of budget.

    ``counted_runs``: runs that must be evidence (not busy) before a decided case stops, within the budget: a baseline
    being saved (``--dlperf-save-baseline``) re-measures its busy runs, so that its figure and spread come from as
    many runs of a quiet machine as were asked for.  ``probe_runs``: the baseline's runs' host probe readings (by
    key), for the probes' own spread in the notes (:func:`pytest_dlperf.gate.figures.probe_notes`).
    ``more(attempt, evidence)``: whether a decided case still wants another run (a scaling gate that failed).  The
    tolerance is the expected one (a case without a baseline is decided after its first runs).
    ``spacing``: the least seconds between two runs' starts (a save: :data:`SAVE_SPAN` over its counted runs),
    waited for with ``sleep``; ``clock``: the time, as :func:`time.monotonic` gives it.  ``drift``: the drift
    between sessions the interval carries (:mod:`.drift`); None: the prior.  Runs cut short far off the baseline
    end the case as :func:`far_ended` says (:mod:`.far`).
    """
    tolerance = expected.tolerance if expected is not None else 0.05
    references = probe_references(expected)
    last_start = clock()
    attempts: list[Attempt] = []
    while True:
        index = len(attempts)
        if index and spacing > 0 and (wait := spacing - (clock() - last_start)) > 0:
            sleep(wait)
        last_start = clock()
        attempts.append(measure_one(index))
        attempt = Attempt.from_runs([run for one in attempts for run in one.runs], attempts[0].unit,
                                    attempts[0].device)
        # Busy for a named cause only (figures.busy_reason; none with dlperf_max_interference off).  A probe far below
        # the baseline's, or below a save's other runs', makes no run busy: the case's own processes can lower it.
        figures = fig.run_figures(attempt.runs, budget.max_interference)
        if far_ended(figures, len(attempts), budget):
            return attempt, far_off(figures, expected, baseline_runs, drift)
        if len(attempts) < budget.first_runs or (figures and all(f.far for f in figures)):
            continue
        notes = fig.probe_notes(figures, references, probe_runs, budget.probe_drops) + fig.throttle_notes(attempt.runs)
        evidence, contradicted = evidence_now(figures, expected, baseline_runs, tolerance, drift, budget, notes,
                                              probe_runs)
        estimate, decision = evidence.estimate, evidence.decision
        if contradicted and estimate.runs >= REGRESSION_RUNS:  # the host's move alone turns the verdict, in runs
            return attempt, out_of_budget(evidence, False, StopReason.HOST_MOVED)  # that agree: no run more helps
        # A regression needs REGRESSION_RUNS runs that agree.  Fine and improved cases are decided on their first run.
        unconfirmed = decision is ev.Decision.REGRESSION and estimate.runs < REGRESSION_RUNS
        wanting = sum(not f.busy for f in figures) < counted_runs
        if decision is not ev.Decision.UNDECIDED and not (unconfirmed or wanting) and not more(attempt, evidence):
            return attempt, evidence
        # A busy host stays busy for a while: two busy runs in a row end the case (a baseline being saved
        # measures on within its budget instead: it needs its counted runs).
        if not counted_runs and len(figures) >= BUSY_RUNS and all(f.busy for f in figures[-BUSY_RUNS:]):
            return attempt, out_of_budget(evidence, unconfirmed, StopReason.BUSY)
        if len(attempts) >= budget.max_runs:
            return attempt, out_of_budget(evidence, unconfirmed, StopReason.MAX_RUNS)
        if figures and figures[-1].busy:
            sleep(min(BUSY_WAIT, attempt.runs[-1].wall_seconds or BUSY_WAIT))
