"""Convergence cases: their runs through the session's launcher, the time to target judged.

A convergence case (a baseline entry with a ``target``) trains in ``seeds`` fresh runs (else
``--dlperf-runs``) on ``--dlperf-convergence-data``, each run to its target or its budget
(:mod:`pytest_dlperf.worker.convergence`).  :func:`judge_times` judges the runs' times to target against
the entry's ``time_to_target`` (:func:`pytest_dlperf.convergence.verdict.judge_time`); a time-to-train
command (:mod:`.command`) is judged the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ... import baseline as baseline_mod
from ...convergence.figures import RunFigures, pooled
from ...convergence.goal import describe, goal_of
from ...convergence.verdict import ExpectedTime, judge_time
from ...gate.policy import Policy
from ...launch.workers import measure
from ...results.judgement import Judgement, Reason
from ...results.runs import RunRecord
from . import Measurement, Plan
from ..references import CaseReference
from ..runner import Runner

#: The unit of a case judged by its time to target.
UNIT = "s"


@dataclasses.dataclass(frozen=True)
class Times:
    """What a time-to-target case's ``judge`` reads: its id, its runs' figures, the goal in words and the
    notes."""

    case_id: str
    figures: tuple[RunFigures, ...]
    budget: str
    notes: tuple[str, ...]


class ConvergenceKind:
    """A built-in model trained to a target accuracy: judged by the time it took."""

    def measure(self, plan: Plan, runner: Runner) -> Measurement:
        """Train the case to its target in ``seeds`` fresh runs."""
        case, entry = plan.case, plan.reference.entry
        goal = goal_of(case, entry)
        runs = (entry.seeds if entry is not None and entry.seeds else None) or runner.options.runs
        params = dataclasses.replace(plan.params, convergence=goal, runs=runs,
                                     data_dir=runner.options.convergence_data)
        done = runner.runs(case, plan.spec, params, plan.folder / "attempt0", label=case.id, unit=plan.spec.unit,
                           measure=measure)
        figures = [RunFigures.from_dict(run.convergence) for run in done]
        warnings = sorted({w for run in done for w in run.warnings})
        return times_measured(plan, figures, done, goal.to_dict(), describe(goal), done[0].device or {}, warnings)

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement:
        return judge_times(measurement, policy)


def expected_time(reference: CaseReference) -> ExpectedTime | None:
    """The entry's ``time_to_target`` with its tolerance, or None (no figure, or unjudged on this machine)."""
    entry = reference.entry
    if entry is None or entry.time_to_target is None or entry.unjudged:
        return None
    return ExpectedTime(entry.time_to_target, reference.tolerance, entry.source)


def times_measured(plan: Plan, figures: list[RunFigures], runs: list[RunRecord], goal: dict[str, Any], budget: str,
                   device: dict[str, Any] | None, warnings: list[str]) -> Measurement:
    """A time-to-target case's measurement: its runs, their pooled figures against the baseline's time.
    ``goal``: what the runs trained to (the results' ``convergence.goal``); ``budget``: the goal in words, for
    the message of a run that did not reach it."""
    entry: baseline_mod.Entry | None = plan.reference.entry
    expected = expected_time(plan.reference)
    notes = [entry.unjudged] if entry is not None and entry.unjudged else []
    convergence = {**pooled(figures), "goal": goal,
                   "baseline": dataclasses.asdict(expected) if expected is not None else None}
    return Measurement.of_runs(UNIT, runs, device=device, convergence=convergence,
                               value=(Times(plan.case.id, tuple(figures), budget, (*notes, *warnings)), expected))


def judge_times(measurement: Measurement, policy: Policy) -> Judgement:
    """The runs' times to target against the baseline's (:func:`judge_time`)."""
    times, expected = measurement.value
    verdict = judge_time(times.case_id, times.figures, expected, budget=times.budget,
                         require_baseline=policy.require_baseline)
    return verdict.adding(*(Reason(note) for note in times.notes))
