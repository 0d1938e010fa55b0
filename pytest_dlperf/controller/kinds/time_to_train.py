"""Time-to-train command cases: a script that trains to its own target, judged by the time it took.

Its runs are :func:`pytest_dlperf.commands.train_time.measure_times`'s (``seeds`` fresh runs of the command,
else ``--dlperf-runs``; the first that does not reach its target is the last); their times are judged as a
convergence case's (:func:`.convergence.judge_times`).
"""

from __future__ import annotations

import dataclasses

from ...commands.spec import CommandSpec
from ...commands.train_time import GOAL, measure_times
from ...gate.policy import Policy
from ...results.judgement import Judgement
from .time_to_target import UNIT, judge_times, times_measured
from . import Measurement, Plan
from ..references import CaseReference
from ..runner import Runner


class TimeToTrainKind:
    """A command registered with ``figure="time_to_train"``: MLPerf's run_start to run_stop."""

    def measure(self, plan: Plan, runner: Runner) -> Measurement:
        """Run the case's seeds."""
        spec, entry = plan.spec, plan.reference.entry
        assert isinstance(spec, CommandSpec)  # judged_by_time says so
        seeds = (entry.seeds if entry is not None and entry.seeds else None) or runner.options.runs
        params = dataclasses.replace(plan.params, runs=seeds)
        with runner.watching(plan.case.id, UNIT) as shown:
            runs, figures = measure_times(plan.case, spec, params, plan.folder, runner.launcher, on_progress=shown)
        goal = {"metric": figures[0].metric, "target": None, "reads": GOAL, "parser": spec.parser}
        notes = sorted({note for run in runs for note in run.warnings})
        return times_measured(plan, figures, runs, goal, GOAL, {"type": params.device}, notes)

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement:
        return judge_times(measurement, policy)
