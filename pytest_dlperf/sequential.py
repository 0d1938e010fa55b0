"""The sequential verdict: measure one fresh run at a time until the evidence decides, or the budget ends.

:func:`measure_until_decided` runs ``--dlperf-runs`` runs, then after each run estimates the
case from the runs that are evidence (:mod:`.evidence`) and stops when the interval decides
(regression, pass, improved) or the budget is spent: ``--dlperf-max-runs`` runs, or
``--dlperf-max-seconds`` for the case (no run starts that would likely end past it).  A run
measured on a busy machine (``--dlperf-max-interference``, ``--dlperf-max-bandwidth-drop``,
``--dlperf-max-core-drop``) is re-measured after a short wait and never counted towards a pass; a run
whose memory bandwidth or core speed was below the baseline's is evidence of a regression only beyond
what that loss explains, and a busy one only where the host's other tenants took it (no other process
in the machine used its CPUs).  A case still
undecided at the budget is *inconclusive*.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import evidence as ev
from .results import Expected
from .runs import Attempt
from .stats import summarize

#: The longest wait before re-measuring a run measured on a busy machine (never longer than that run took).
BUSY_WAIT = 5.0


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much measuring a case may take, and what counts as a busy machine."""

    first_runs: int = 1  # --dlperf-runs: runs before the first decision
    max_runs: int = 5  # --dlperf-max-runs
    max_seconds: float | None = None  # --dlperf-max-seconds
    max_interference: float | None = ev.MAX_INTERFERENCE  # --dlperf-max-interference; None: off
    max_bandwidth_drop: float | None = ev.MAX_BANDWIDTH_DROP  # --dlperf-max-bandwidth-drop; None: off
    max_core_drop: float | None = ev.MAX_CORE_DROP  # --dlperf-max-core-drop; None: off


@dataclasses.dataclass
class Evidence:
    """What the runs showed: every run's figure, the estimate from the evidence runs and the decision."""

    figures: list[ev.RunFigure]
    estimate: ev.Estimate | None  # from the runs that are evidence; None when every run was busy
    decision: ev.Decision
    stopped: str  # "decided", "max-runs" or "time budget"
    #: The busy runs are in the estimate: a pass (or improved) that holds even with them, which only
    #: understate the case (see :func:`assess`).
    busy_counted: bool = False
    #: The estimate from the runs' figures raised by the memory bandwidth they lost (see :func:`assess`);
    #: None where no counted run lost any, or the case passed.
    allowed: ev.Estimate | None = None
    #: What the host gave the counted runs above the baseline's probes (:func:`pytest_dlperf.evidence.host_gain`):
    #: a slowdown may hide behind it.
    host_gain: str | None = None

    @property
    def busy(self) -> list[ev.RunFigure]:
        return [f for f in self.figures if f.busy]

    @property
    def busy_estimate(self) -> float | None:
        """The median of the busy runs, shown when no run was evidence."""
        return summarize([f.value for f in self.busy]).median if self.busy else None

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision.value, "stopped": self.stopped,
                "estimate": None if self.estimate is None else self.estimate.to_dict(),
                "busy_counted": self.busy_counted, "runs": [f.to_dict() for f in self.figures],
                "allowed": None if self.allowed is None else self.allowed.to_dict(), "host_gain": self.host_gain}


#: Evidence runs a regression needs before it is declared (while the run budget allows them).
REGRESSION_RUNS = 2


def assess(figures: Sequence[ev.RunFigure], expected: Expected | None, baseline_runs: Sequence[float],
           tolerance: float) -> tuple[ev.Estimate | None, ev.Decision, bool, ev.Estimate | None]:
    """The estimate from the runs that are evidence, what it decides (no baseline: pass), whether
    the busy runs are in it, and the estimate allowing for the memory bandwidth the runs lost.

    A busy run is no evidence of a regression, but the slowness it shows is the machine's: it
    measured at most what the case gives on a quiet machine.  So where the evidence runs alone
    leave the case undecided (or there are none) and the interval from all runs together,
    busy ones included, lies above the threshold (pass, or improved), the quiet case's figure
    lies above it too.

    The same holds, in part, for a run whose memory or core probe measured less than the
    baseline's: its *allowed* figure (:func:`pytest_dlperf.evidence.bandwidth_allowance`: raised
    by what the host took) is the most it could have measured with the baseline's bandwidth and
    core.  A regression is decided from the allowed figures of the runs that count against the
    case (:attr:`pytest_dlperf.evidence.RunFigure.counts_against`): the counted runs, and those
    busy only because the host's other tenants took more than ``--dlperf-max-bandwidth-drop`` of
    the bandwidth or ``--dlperf-max-core-drop`` of the core
    (:func:`pytest_dlperf.evidence.host_alone`), which are no evidence of a pass.  Runs busy for
    other processes on the machine's CPUs or GPU never count against it.  The allowed estimate is
    the fourth item where any such run lost bandwidth or core and the case was not decided a pass;
    where runs busy for what the host took alone decide a regression, the estimate is that of
    all the runs that count against the case.
    """
    values = [f.value for f in figures if not f.busy]
    if not values and expected is None:
        # Nothing to judge, so no false alarm to avoid: not re-measured (the message says the runs were busy).
        values = [f.value for f in figures]
    base = expected.throughput if expected is not None else None
    runs = baseline_runs if base is not None else ()
    estimate, decision = None, ev.Decision.UNDECIDED
    if values:
        estimate = ev.estimate(values, tolerance, base, runs)
        decision = ev.decide(estimate, tolerance)
    if base is not None and decision is ev.Decision.UNDECIDED and len(values) < len(figures):
        with_busy = ev.estimate([f.value for f in figures], tolerance, base, runs)
        if ev.decide(with_busy, tolerance) in (ev.Decision.PASS, ev.Decision.IMPROVED):
            return with_busy, ev.decide(with_busy, tolerance), True, None
    allowed = None
    against = [f for f in figures if f.counts_against]
    if base is not None and against and decision in (ev.Decision.REGRESSION, ev.Decision.UNDECIDED) \
            and any(f.allowance > 1.0 for f in against):
        allowed = ev.estimate([f.allowed for f in against], tolerance, base, runs)
        if ev.decide(allowed, tolerance) is not ev.Decision.REGRESSION:
            if decision is ev.Decision.REGRESSION:
                decision = ev.Decision.UNDECIDED  # what the host took can explain it: measure again
        elif len(against) > len(values):  # runs busy for what the host took alone: slower than it explains
            estimate, decision = ev.estimate([f.value for f in against], tolerance, base, runs), ev.Decision.REGRESSION
    return estimate, decision, False, allowed


def out_of_budget(evidence: Evidence, unconfirmed: bool, why: str) -> Evidence:
    """The evidence when the budget ends: a regression that fewer than :data:`REGRESSION_RUNS` evidence
    runs show (the others busy, or a budget of one run) is not confirmed, so undecided: the
    verdict is inconclusive, and with its estimate below the threshold it fails by default,
    saying "not confirmed" (``--dlperf-inconclusive``)."""
    evidence.stopped = why
    if unconfirmed:
        evidence.decision = ev.Decision.UNDECIDED
    return evidence


def merge(attempts: Sequence[Attempt]) -> Attempt:
    """One attempt of every run so far: their windows pooled (the windows' statistics), runs in order."""
    return Attempt.from_runs([run for attempt in attempts for run in attempt.runs], attempts[0].unit,
                             attempts[0].device)


def measure_until_decided(measure_one: Callable[[int], Attempt], expected: Expected | None,
                          baseline_runs: Sequence[float], budget: Budget,
                          more: Callable[[Attempt, Evidence], bool] = lambda attempt, evidence: False,
                          sleep: Callable[[float], None] = time.sleep,
                          bandwidth: float | None = None, counted_runs: int = 0,
                          core: float | None = None) -> tuple[Attempt, Evidence]:
    """Measure ``measure_one(index)`` (one fresh run each) until decided or out of budget.

    ``bandwidth``, ``core``: the memory bandwidth (GB/s) and core speed (GFLOP/s) the baseline's
    runs measured, the references for the runs' own (:func:`pytest_dlperf.evidence.run_figures`).

    ``counted_runs``: runs that must be evidence (not busy) before a decided case stops, within the
    budget: a baseline being saved (``--dlperf-save-baseline``) re-measures its busy runs, so that
    its figure, spread and bandwidth come from as many runs of a quiet machine as were asked for.

    ``more(attempt, evidence)``: whether a decided case still wants another run (a scaling gate
    that failed).  The tolerance is the expected one (a case without a baseline is decided
    after its first runs).
    """
    tolerance = expected.tolerance if expected is not None else 0.05
    started = time.monotonic()
    attempts: list[Attempt] = []
    while True:
        index = len(attempts)
        attempts.append(measure_one(index))
        attempt = merge(attempts)
        figures = ev.run_figures(attempt.runs, budget.max_interference, bandwidth, budget.max_bandwidth_drop,
                                 core, budget.max_core_drop)
        if len(attempts) < budget.first_runs:
            continue
        estimate, decision, busy_counted, allowed = assess(figures, expected, baseline_runs, tolerance)
        gain = ev.host_gain(figures, bandwidth, core, budget.max_bandwidth_drop, budget.max_core_drop)
        evidence = Evidence(figures, estimate, decision, "decided", busy_counted, allowed, gain)
        # A regression needs REGRESSION_RUNS runs that agree: one fresh run can be an outlier the spread
        # of earlier runs does not foresee (measured here: one unchanged run 25% below a baseline whose
        # five runs spread 9%).  Fine and improved cases are decided on their first run.
        unconfirmed = decision is ev.Decision.REGRESSION and estimate.runs < REGRESSION_RUNS
        wanting = sum(not f.busy for f in figures) < counted_runs
        if decision is not ev.Decision.UNDECIDED and not unconfirmed and not wanting and not more(attempt, evidence):
            return attempt, evidence
        if len(attempts) >= budget.max_runs:
            return attempt, out_of_budget(evidence, unconfirmed, "max-runs")
        elapsed = time.monotonic() - started
        per_run = elapsed / len(attempts)
        if budget.max_seconds is not None and elapsed + per_run > budget.max_seconds:
            return attempt, out_of_budget(evidence, unconfirmed, "time budget")
        if figures and figures[-1].busy:
            sleep(min(BUSY_WAIT, attempt.runs[-1].get("wall_seconds") or BUSY_WAIT))
