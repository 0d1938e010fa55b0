"""The verdict of a convergence case: the target reached in every run, then the time it took.

* a run that did not reach the target within its budget fails the case ("target not
  reached"), whatever the time;
* the time to target of the runs (each run its own seed: the evidence MLPerf uses) is
  gated against the baseline's ``time_to_target`` with the throughput verdict's statistics
  (:mod:`pytest_dlperf.gate.evidence`): the geometric mean of the runs' times with its 98%
  interval, on the log scale; lower is better.  The whole interval above ``baseline x (1 +
  tolerance)`` fails, wholly below ``x (1 - tolerance)`` is *improved*, wholly below the upper
  threshold passes; otherwise the case is *inconclusive* (its seeds are its runs: there is no
  sequential re-measurement), failed as ``--dlperf-inconclusive`` says (:mod:`pytest_dlperf.gate.policy`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..gate import evidence as ev
from ..gate.format import fmt_pct
from ..gate.stats import summarize
from ..results.judgement import Gate, GateName, Judgement, Reason, Status, Why
from .figures import RunFigures


@dataclasses.dataclass(frozen=True)
class ExpectedTime:
    """The baseline's median seconds to target, its tolerance (a fraction) and where it comes from."""

    seconds: float
    tolerance: float
    source: str | None = None


def _seeds(runs: Sequence[RunFigures]) -> str:
    return f"{len(runs)} run{'s' if len(runs) != 1 else ''} (seed{'s' if len(runs) != 1 else ''} " \
           f"{', '.join(str(r.seed) for r in runs)})"


def _metric(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


#: What a run without a target of ours reached: a time-to-train command case's script trains to its own
#: (MLPerf: run_stop with status success, pytest_dlperf.commands.train_time).
OWN_TARGET = "trained to its own target"


def goal_reached(run: RunFigures) -> str:
    """``top1 0.9 reached``, or for a command's own target :data:`OWN_TARGET`."""
    return OWN_TARGET if run.target is None else f"{run.metric} {run.target:g} reached"


def _judged(status: Status, text: str, difference: float | None = None, *, undecided: bool = False,
            beyond: str | None = None) -> Judgement:
    return Judgement(status, (Reason(text, Why.HEADLINE),), (Gate(GateName.TIME_TO_TARGET, status),), difference,
                     undecided, beyond)


def judge_time(case_id: str, runs: Sequence[RunFigures], expected: ExpectedTime | None, *,
               budget: str = "", require_baseline: bool = False, max_cv: float = 0.10) -> Judgement:
    """The case's judgement from its runs' figures; ``budget`` describes the goal for the message.  Undecided:
    INCONCLUSIVE, ``beyond`` ("above") where the estimate is slower than the threshold; the session's
    ``--dlperf-inconclusive`` policy says whether that fails (:func:`pytest_dlperf.gate.policy.settle`)."""
    missed = [r for r in runs if not r.reached]
    if missed:
        worst = missed[0]
        why = {"diverged": "diverged, the training loss is not finite", "epochs": "the epoch budget spent",
               "seconds": "the time budget spent"}.get(worst.stopped, worst.stopped)
        epochs = f"{worst.epochs:.1f} epochs, " if worst.epochs else ""
        return _judged(Status.FAIL, f"{case_id}: target not reached in {len(missed)} of {_seeds(runs)}: "
                                    f"{worst.metric} {_metric(worst.final)} at the end (seed {worst.seed}, "
                                    f"{epochs}{worst.seconds:.1f} s; stopped: {why}); goal {budget}")
    seconds = [r.seconds_to_target for r in runs]
    times = summarize(seconds)
    value = times.median
    known = [r.epochs_to_target for r in runs if r.epochs_to_target is not None]
    epochs = f"{summarize(known).median:.1f} epochs; " if len(known) == len(runs) else ""
    what = f"{case_id}: {goal_reached(runs[0])} in {value:.1f} s ({epochs}median of {_seeds(runs)})"
    noise = f"; noisy: CV {fmt_pct(times.cv)} over {times.n} runs" if times.n > 1 and times.cv > max_cv else ""
    if expected is None:
        status = Status.FAIL if require_baseline else Status.NO_BASELINE
        tail = " and dlperf_require_baseline is set" if require_baseline else ""
        return _judged(status, f"{what}, no time-to-target baseline{tail}{noise}")
    est = ev.estimate(seconds, expected.tolerance, baseline=expected.seconds)
    diff = est.value / expected.seconds - 1.0
    source = f"; source: {expected.source}" if expected.source else ""
    figure = f"{est.value:.1f} s ({est.interval_text()}; geometric mean)"
    slow = expected.seconds * (1.0 + expected.tolerance)
    against = f"the baseline {expected.seconds:.1f} s (tolerance {fmt_pct(expected.tolerance)}{source})"
    decision = ev.decide(est, expected.tolerance, lower_is_better=True)
    if decision is ev.Decision.REGRESSION:
        return _judged(Status.FAIL, f"{what}: {figure} is {fmt_pct(diff)} slower than {against}", diff)
    if decision is ev.Decision.IMPROVED:
        return _judged(Status.IMPROVED, f"{what}: {figure} is {fmt_pct(-diff)} faster than {against}; improved: "
                                        "update the baseline", diff)
    if decision is ev.Decision.PASS:
        sign = "+" if diff >= 0 else "-"
        return _judged(Status.PASS, f"{what}: {figure} is within {fmt_pct(expected.tolerance)} of the baseline "
                                    f"{expected.seconds:.1f} s ({sign}{fmt_pct(abs(diff))}{source})", diff)
    side = f"{fmt_pct(diff)} slower" if diff >= 0 else f"{fmt_pct(-diff)} faster"
    return _judged(Status.INCONCLUSIVE, f"{what}: {figure} is {side} than {against}; inconclusive: the interval "
                                        "spans the threshold (more seeds decide)", diff, undecided=True,
                   beyond="above" if est.value > slow else None)
