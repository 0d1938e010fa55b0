"""``--dlperf-data-only``: a throughput case's data loader timed alone, one run, a data-only verdict."""

from __future__ import annotations

import dataclasses

from ... import data
from ...gate.policy import Policy
from ...results.judgement import Gate, GateName, Judgement, Reason, Status, Why
from ...results.runs import Attempt
from ..references import CaseReference
from ..runner import Runner
from . import Measurement, Plan


class DataOnlyKind:
    """``--dlperf-data-only``: the loader's figures, a data-only verdict, never a baseline judgement.

    ``throughput`` stays None, so the loader's figure can never be saved as a baseline, taken as a 1-rank
    scaling reference or judged; it lives in ``data``."""

    def measure(self, plan: Plan, runner: Runner) -> Measurement:
        params = dataclasses.replace(plan.params, runs=1)
        runs = runner.runs(plan.case, plan.spec, params, plan.folder, label=plan.label, unit=plan.spec.unit)
        attempt = Attempt.from_runs(runs, plan.spec.unit)
        return Measurement(attempt.unit, [attempt.record()], stats=attempt.summary.to_dict(), device=attempt.device,
                           ranks=attempt.ranks(), telemetry=attempt.telemetry(), data=attempt.data(),
                           value=(plan.case.id, tuple(attempt.warnings)))

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement:
        case_id, warnings = measurement.value
        expected = reference.expected
        line = data.data_only_message(case_id, measurement.data, measurement.unit,
                                      expected.throughput if expected is not None else None)
        return Judgement(Status.DATA_ONLY, (Reason(line, Why.HEADLINE), *(Reason(w) for w in warnings)),
                         (Gate(GateName.DATA, Status.DATA_ONLY),))
