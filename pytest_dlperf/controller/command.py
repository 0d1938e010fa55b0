"""Time-to-train command cases: a script that trains to its own target, judged by the time it took.

Its runs are :func:`pytest_dlperf.commands.train_time.measure_times`'s (``seeds`` fresh runs of the command,
else ``--dlperf-runs``; the first that does not reach its target is the last); their times are judged and
recorded as a convergence case's (:func:`.convergence.record_time`).
"""

from __future__ import annotations

import dataclasses

from .. import baseline as baseline_mod
from .. import models
from ..cases import Case
from ..commands.spec import CommandSpec
from ..commands.train_time import GOAL, judged_by_time, measure_times
from ..models import ModelSpec
from .context import CaseKind, Context, Properties
from .convergence import UNIT, record_time


class TimeToTrainKind(CaseKind):
    """A command registered with ``figure="time_to_train"``: MLPerf's run_start to run_stop."""

    name = "time-to-train command"

    def applies(self, case: Case, spec: ModelSpec) -> bool:
        return judged_by_time(case, spec)

    def run(self, ctx: Context, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
            properties: Properties) -> None:
        """Run the case's seeds, judge its times to train and record it; raise CaseFailed when it failed."""
        spec = models.get_model_spec(case.model)
        assert isinstance(spec, CommandSpec)  # judged_by_time says so
        seeds = (entry.seeds if entry is not None and entry.seeds else None) or ctx.options.runs
        params = dataclasses.replace(ctx.params_for(case, entry), runs=seeds)
        result = ctx.start(case, nodeid, UNIT, params)

        def measure():
            with ctx.watching(case.id, UNIT) as shown:
                return measure_times(case, spec, params, ctx.case_dir(case), ctx.launcher, on_progress=shown)

        runs, figures = ctx.measured(result, properties, measure)
        goal = {"metric": figures[0].metric, "target": None, "reads": GOAL, "parser": spec.parser}
        notes = sorted({note for run in runs for note in run.warnings})
        record_time(ctx, case, entry, result, figures, runs, goal, GOAL, {"type": params.device}, notes, properties)
