"""An A/B session's throughput case: interleaved pairs of fresh runs, one of each side, judged on their ratios.

:class:`PairedKind` runs a throughput case as :mod:`pytest_dlperf.gate.paired` says: pair by pair, each side's run
through the case's measure function (:func:`pytest_dlperf.controller.throughput.measurer_for`: our worker, or a
command case's command) started by the side's launcher (:class:`~.launcher.SideLauncher`), its runs in the case's
folder under ``candidate/`` and ``reference/``; then the case's record: the candidate's figure against the
reference's as its baseline, the pairs, the verdict and its message (:mod:`.report`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .. import baseline as baseline_mod
from .. import models
from ..cases import Case
from ..controller.context import CaseKind, Context, Properties
from ..controller.throughput import measurer_for
from ..gate import figures as fig
from ..gate import paired
from .pairs import measure_pairs
from ..gate.evidence import Decision
from ..gate.sequential import Budget
from ..gate.verdict import inconclusive_fails
from ..launch.workers import CaseError
from ..models import ModelSpec
from ..reporting import junit
from ..results.case import CaseFailed, CaseResult, Expected, Status
from ..results.runs import Attempt, RunRecord
from . import report
from .launcher import SideLauncher
from .sides import Side

if TYPE_CHECKING:
    from . import AB

STATUSES = {Decision.REGRESSION: Status.FAIL, Decision.PASS: Status.PASS, Decision.IMPROVED: Status.IMPROVED,
            Decision.UNDECIDED: Status.INCONCLUSIVE}


def side_spec(spec: ModelSpec, side: Side) -> ModelSpec:
    """The case's model as ``side`` registers it: a git revision's from the worktree's copy of its file."""
    mapped = side.mapped(spec.source)
    return spec if mapped == spec.source else dataclasses.replace(spec, source=mapped)


class PairedKind(CaseKind):
    """A throughput case of an A/B session (``--dlperf-against``)."""

    name = "paired"

    def __init__(self, ab: AB):
        self.ab = ab

    def applies(self, case: Case, spec: ModelSpec) -> bool:
        return True

    def run(self, ctx: Context, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
            properties: Properties) -> None:
        spec = models.get_model_spec(case.model)
        params = ctx.params_for(case, entry)
        result = ctx.start(case, nodeid, spec.unit, params)
        opts, ab = ctx.options, self.ab
        tolerance = ctx.tolerance(entry)
        max_pairs = opts.max_runs if opts.max_runs_given else max(opts.runs, paired.MAX_PAIRS)
        budget = Budget(opts.runs, max_pairs, opts.max_seconds, opts.max_interference)
        one = dataclasses.replace(params, runs=1)
        sides = {s.name: (side_spec(spec, s), SideLauncher(ctx.launcher, s, ab.forkable))
                 for s in (ab.candidate, ab.reference)}
        runs: dict[str, list[RunRecord]] = {name: [] for name in sides}
        label = ctx.searches.label(case, ctx.device)

        def measure_pair(index: int, order: tuple[str, str]) -> paired.Pair:
            figures = {}
            for name in order:
                model, launcher = sides[name]
                with ctx.watching(f"{label} [{name}]", spec.unit) as shown:
                    try:
                        done = measurer_for(model)(case, model, one, ctx.case_dir(case) / name, launcher,
                                                   on_progress=shown, first_index=index)
                    except CaseError as exc:
                        raise CaseError(f"{exc.message.split(': ', 1)[0]} ({name}): "
                                        f"{exc.message.split(': ', 1)[-1]}", exc.kind,
                                        runs["reference"] + runs["candidate"] + exc.runs) from None
                runs[name].extend(done)
                figures[name] = fig.run_figures(done, opts.max_interference)[0]
            return paired.Pair(index, order[0], figures[paired.CANDIDATE], figures[paired.REFERENCE])

        found = ctx.measured(result, properties,
                             lambda: measure_pairs(measure_pair, budget, tolerance, ab.seed))
        if found is None:
            return
        record(ctx, result, found, runs, spec.unit, ab)
        properties.extend(junit.properties(result))
        if result.verdict is Status.FAIL:
            raise CaseFailed(result.message)


def record(ctx: Context, result: CaseResult, found: paired.PairedEvidence, runs: dict[str, list[RunRecord]],
           unit: str, ab: AB) -> None:
    """The case's record: each side's runs as an attempt (the reference's first, the candidate's last: a case's
    figure is its last attempt's), the candidate's figure against the reference's, the pairs and the verdict."""
    attempts = {name: Attempt.from_runs(runs[name], unit) for name in (paired.REFERENCE, paired.CANDIDATE)}
    result.attempts += [attempt.record() for attempt in attempts.values()]
    status = STATUSES[found.decision]
    if status is Status.INCONCLUSIVE:
        below = found.estimate is not None and found.estimate.value < 1 - found.tolerance
        status = Status.FAIL if inconclusive_fails(ctx.options.inconclusive, below) else status
    cand, ref = found.side_mean(paired.CANDIDATE), found.side_mean(paired.REFERENCE)
    last = attempts[paired.CANDIDATE]
    result.judged, result.paired = True, found
    result.verdict = status
    result.throughput_verdict = STATUSES[found.decision]
    result.message = report.message(result.id, found, status, ab.stack, ab.differences, unit)
    result.throughput = cand
    result.baseline = Expected(ref, unit, found.tolerance, f"reference: {ab.reference.describe()}") if ref else None
    result.difference = found.estimate.value - 1.0 if found.estimate is not None else \
        (cand / ref - 1.0 if cand and ref else None)
    result.stats, result.device, result.ranks = last.summary.to_dict(), last.device, last.ranks()
    result.telemetry = last.telemetry()

