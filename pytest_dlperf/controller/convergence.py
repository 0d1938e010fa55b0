"""Convergence cases: their runs through the session's launcher, the time to target judged, the case recorded.

A convergence case (a baseline entry with a ``target``) trains in ``seeds`` fresh runs (else
``--dlperf-runs``) on ``--dlperf-convergence-data``, each run to its target or its budget
(:mod:`pytest_dlperf.worker.convergence`).  :func:`record_time` judges the runs' times to target against
the entry's ``time_to_target`` (:func:`pytest_dlperf.convergence.verdict.judge_time`) and records them;
a time-to-train command (:mod:`.command`) is recorded the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import baseline as baseline_mod
from .. import models
from ..cases import Case
from ..convergence.figures import RunFigures, pooled
from ..convergence.goal import describe, goal_of
from ..convergence.verdict import ExpectedTime, judge_time
from ..launch.workers import measure
from ..models import ModelSpec
from ..results.case import CaseFailed, CaseResult
from ..results.runs import RunRecord
from .context import CaseKind, Context, Properties

#: The unit of a case judged by its time to target.
UNIT = "s"


class ConvergenceKind(CaseKind):
    """A built-in model trained to a target accuracy: judged by the time it took."""

    name = "convergence"

    def applies(self, case: Case, spec: ModelSpec) -> bool:
        return case.converges

    def run(self, ctx: Context, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
            properties: Properties) -> None:
        """Train ``case`` to its target in ``seeds`` fresh runs, judge and record it; raise CaseFailed when it
        failed."""
        spec = models.get_model_spec(case.model)
        goal = goal_of(case, entry)
        runs = (entry.seeds if entry is not None and entry.seeds else None) or ctx.options.runs
        params = dataclasses.replace(ctx.params_for(case, entry), convergence=goal, runs=runs,
                                     data_dir=ctx.options.convergence_data)
        result = ctx.start(case, nodeid, UNIT, params)

        def measure_runs() -> list[RunRecord]:
            with ctx.watching(case.id, spec.unit) as shown:
                return measure(case, spec, params, ctx.case_dir(case) / "attempt0", ctx.launcher, on_progress=shown)

        remote = f"{case.id}: ranks of a convergence run ran on this node; the node of rank 0 reports"
        done = ctx.measured(result, properties, measure_runs, remote=lambda ranks: remote)
        if done is None:
            return
        figures = [RunFigures.from_dict(run.convergence) for run in done]
        warnings = sorted({w for run in done for w in run.warnings})
        record_time(ctx, case, entry, result, figures, done, goal.to_dict(), describe(goal),
                    done[0].device or {}, warnings, properties)


def expected_time(ctx: Context, entry: baseline_mod.Entry | None) -> ExpectedTime | None:
    """The entry's ``time_to_target`` with its tolerance, or None (no figure, or unjudged on this machine)."""
    if entry is None or entry.time_to_target is None or entry.unjudged:
        return None
    return ExpectedTime(entry.time_to_target, ctx.tolerance(entry), entry.source)


def record_time(ctx: Context, case: Case, entry: baseline_mod.Entry | None, result: CaseResult,
                figures: list[RunFigures], runs: list[RunRecord], goal: dict[str, Any], budget: str,
                device: dict[str, Any] | None, warnings: list[str], properties: Properties) -> None:
    """Judge the runs' times to target (:func:`judge_time`) and record them in ``result``; raise CaseFailed
    when the case failed.  ``goal``: what the runs trained to (the results' ``convergence.goal``);
    ``budget``: the goal in words, for the message of a run that did not reach it."""
    expected = expected_time(ctx, entry)
    verdict = judge_time(case.id, figures, expected, budget=budget, require_baseline=ctx.options.require_baseline,
                         inconclusive=ctx.options.inconclusive)
    result.record_runs(runs)
    result.convergence = {**pooled(figures), "goal": goal,
                          "baseline": dataclasses.asdict(expected) if expected is not None else None}
    result.device, result.difference = device, verdict.difference
    notes = [entry.unjudged] if entry is not None and entry.unjudged else []
    result.verdict = verdict.status
    result.message = "; ".join([verdict.message, *notes, *warnings])
    properties.append(("dlperf_verdict", verdict.status.value))
    if result.convergence["seconds_to_target"] is not None:
        properties.append(("dlperf_time_to_target", round(result.convergence["seconds_to_target"], 3)))
    if verdict.failed:
        raise CaseFailed(result.message)
