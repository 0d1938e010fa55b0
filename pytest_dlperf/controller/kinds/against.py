"""An A/B session's throughput case: interleaved pairs of fresh runs, one of each side, judged on their ratios.

:class:`PairedKind` runs a throughput case as :mod:`pytest_dlperf.gate.paired` says: pair by pair, each side's run
through the case's measure function (:func:`pytest_dlperf.controller.runner.measurer_for`: our worker, or a
command case's command) started by the side's launcher (:class:`~.launcher.SideLauncher`), its runs in the case's
folder under ``candidate/`` and ``reference/``; then the case's record: the candidate's figure against the
reference's as its baseline, the pairs, the verdict and its message (:mod:`.report`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from . import Measurement, Plan
from ..references import CaseReference
from ..runner import Runner
from ...gate import figures as fig
from ...gate import paired
from ...gate.evidence import Decision
from ...gate.policy import Policy
from ...gate.sequential import Budget
from ...launch.workers import CaseError
from ...models import ModelSpec
from ...results.case import Expected, Status
from ...results.judgement import Gate, GateName, Judgement, Reason, Why
from ...results.runs import Attempt, RunRecord
from ...ab import report
from ...ab.launcher import SideLauncher
from ...ab.pairs import measure_pairs
from ...ab.sides import Side

if TYPE_CHECKING:
    from ...ab import AB

STATUSES = {Decision.REGRESSION: Status.FAIL, Decision.PASS: Status.PASS, Decision.IMPROVED: Status.IMPROVED,
            Decision.UNDECIDED: Status.INCONCLUSIVE}


def side_spec(spec: ModelSpec, side: Side) -> ModelSpec:
    """The case's model as ``side`` registers it: a git revision's from the worktree's copy of its file."""
    mapped = side.mapped(spec.source)
    return spec if mapped == spec.source else dataclasses.replace(spec, source=mapped)


class PairedKind:
    """A throughput case of an A/B session (``--dlperf-against``)."""

    def __init__(self, ab: AB):
        self.ab = ab

    def measure(self, plan: Plan, runner: Runner) -> Measurement:
        opts, ab, case, spec = runner.options, self.ab, plan.case, plan.spec
        max_pairs = opts.max_runs if opts.max_runs_given else max(opts.runs, paired.MAX_PAIRS)
        budget = Budget(opts.runs, max_pairs, opts.max_interference)
        one = dataclasses.replace(plan.params, runs=1)
        sides = {s.name: (side_spec(spec, s), SideLauncher(runner.launcher, s, ab.forkable))
                 for s in (ab.candidate, ab.reference)}
        runs: dict[str, list[RunRecord]] = {name: [] for name in sides}

        def measure_pair(index: int, order: tuple[str, str]) -> paired.Pair:
            figures = {}
            for name in order:
                model, launcher = sides[name]
                try:
                    done = runner.runs(case, model, one, plan.folder / name, label=f"{plan.label} [{name}]",
                                       unit=spec.unit, first_index=index, launcher=launcher)
                except CaseError as exc:
                    raise CaseError(f"{name} side: {exc.message}", exc.kind,
                                    runs["reference"] + runs["candidate"] + exc.runs) from None
                runs[name].extend(done)
                figures[name] = fig.run_figures(done, opts.max_interference)[0]
            return paired.Pair(index, order[0], figures[paired.CANDIDATE], figures[paired.REFERENCE])

        found = measure_pairs(measure_pair, budget, plan.reference.tolerance, ab.seed)
        return measured(found, runs, spec.unit, ab, plan.case.id)

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement:
        found: paired.PairedEvidence = measurement.paired
        case_id, stack, changes = measurement.value
        status = STATUSES[found.decision]
        undecided = status is Status.INCONCLUSIVE
        below = undecided and found.estimate is not None and found.estimate.value < 1 - found.tolerance
        first, *rest = report.lines(case_id, found, stack, changes, measurement.unit)
        return Judgement(status, (Reason(first, Why.HEADLINE, status), *(Reason(r, Why.EVIDENCE) for r in rest)),
                         (Gate(GateName.PAIRED, status),), measurement_difference(measurement), undecided,
                         "below" if below else None)


def measured(found: paired.PairedEvidence, runs: dict[str, list[RunRecord]], unit: str, ab: AB,
             case_id: str) -> Measurement:
    """The case's measurement: each side's runs as an attempt (the reference's first, the candidate's last: a
    case's figure is its last attempt's), the candidate's figure against the reference's as its baseline."""
    attempts = {name: Attempt.from_runs(runs[name], unit) for name in (paired.REFERENCE, paired.CANDIDATE)}
    cand, ref = found.side_mean(paired.CANDIDATE), found.side_mean(paired.REFERENCE)
    last = attempts[paired.CANDIDATE]
    return Measurement(
        unit, [attempt.record() for attempt in attempts.values()], throughput=cand,
        baseline=Expected(ref, unit, found.tolerance, f"reference: {ab.reference.describe()}") if ref else None,
        stats=last.summary.to_dict(), device=last.device, ranks=last.ranks(), telemetry=last.telemetry(),
        paired=found, value=(case_id, ab.stack, tuple(ab.differences)))


def measurement_difference(measurement: Measurement) -> float | None:
    """The candidate against the reference: the pairs' estimate, else the sides' means."""
    found, cand = measurement.paired, measurement.throughput
    ref = measurement.baseline.throughput if measurement.baseline is not None else None
    if found.estimate is not None:
        return found.estimate.value - 1.0
    return cand / ref - 1.0 if cand and ref else None
