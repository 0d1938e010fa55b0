"""Verdicts: the gates of a case and the message that reports them.

* the throughput gate (:func:`judge_evidence`): the runs' interval against ``baseline x (1 - tolerance)``
  (:mod:`pytest_dlperf.gate.sequential` decides when to stop);
* the scaling gate (:func:`scaling`): an N-rank case's efficiency against a minimum;
* the utilization gate (:func:`utilization_gate`): the lowest GPU's mean utilization;
* :func:`combine`: the case's one judgement from its gates (its words: :mod:`pytest_dlperf.reporting.verdicts`).

Each returns a :class:`~pytest_dlperf.results.judgement.Judgement` or the records it is made of; whether an
undecided case fails is the session's policy (:mod:`.policy`), applied once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..results.case import Expected, GateResult, GateStatus, Scaling
from ..results.judgement import Gate, GateName, Judgement, Reason, Status, Why
from ..results.telemetry import gpu_utilizations
from . import far
from .evidence import (CAUGHT_POWER, WITHIN, Decision, Estimate, Evidence, StopReason, could_catch, near,
                       ruled_out, runs_to_decide)
from .format import fmt_pct, fmt_signed, fmt_value
from .policy import INCONCLUSIVE_POLICIES  # noqa: F401  (the options' choices)

PASS, IMPROVED, NO_BASELINE, FAIL = Status.PASS, Status.IMPROVED, Status.NO_BASELINE, Status.FAIL
__all__ = ["PASS", "IMPROVED", "NO_BASELINE", "FAIL", "Expected", "Scaling", "Judgement", "scaling",
           "scaling_message", "utilization_gate", "combine", "judge_evidence"]


#: The kinds of 1-rank reference (:attr:`pytest_dlperf.results.case.Scaling.reference_kind`).
PLAIN_PROCESS, ONE_RANK_DDP = "plain process", "one-rank DDP"


def scaling(throughput: float, ranks: int, reference: float, reference_source: str,
            minimum: float | None, reference_kind: str | None = None, shared_gpus: int | None = None) -> Scaling:
    speedup = throughput / reference
    return Scaling(ranks, reference, reference_source, speedup, speedup / ranks, minimum, reference_kind,
                   shared_gpus)


def scaling_message(case_id: str, s: Scaling, unit: str) -> str:
    kind = f" ({s.reference_kind})" if s.reference_kind else ""
    base = (f"scaling efficiency {fmt_pct(s.efficiency)} (speedup {s.speedup:.2f}x on {s.ranks} ranks over "
            f"{fmt_value(s.reference)} {unit} on 1{kind}, from {s.reference_source})")
    if s.shared_gpus is not None:
        return (f"{base}: measures no scaling, the {s.ranks} ranks shared {s.shared_gpus} GPU(s) over gloo "
                "(--dlperf-share-gpus); not gated")
    if s.failed:
        return f"{case_id}: {base} is below the minimum {fmt_pct(s.minimum)}"
    return base


def utilization_gate(case_id: str, ranks: int, minimum: float | None, summaries: Sequence[Mapping[str, Any]],
                     telemetry_off: bool) -> GateResult | None:
    """The ``min_gpu_utilization`` gate: every sampled GPU's mean utilization against ``minimum``.

    ``summaries``: the case's telemetry summaries (:func:`pytest_dlperf.results.telemetry_summaries`).
    Not gated (never failed) where GPU telemetry is unavailable or turned off.
    """
    if minimum is None:
        return None
    wanted = f"{100 * minimum:g}%"
    if telemetry_off:
        return GateResult(GateStatus.NOT_GATED, minimum, f"{case_id}: min_gpu_utilization {wanted} not gated: "
                                                         "telemetry is off (dlperf_no_telemetry)")
    utils = gpu_utilizations(summaries)
    if not utils:
        reason = next((s["gpu"].get("reason") for s in summaries if s.get("gpu", {}).get("reason")),
                      "no telemetry")
        return GateResult(GateStatus.NOT_GATED, minimum, f"{case_id}: min_gpu_utilization {wanted} not gated: "
                                                         f"GPU telemetry unavailable ({reason})")
    rank, mean, _ = min(utils, key=lambda u: u[1])
    where = f" on rank {rank}" if rank is not None and ranks > 1 else ""
    if mean < 100 * minimum:
        return GateResult(GateStatus.FAIL, minimum, f"{case_id}: GPU utilization {mean:.1f}%{where} (mean over the "
                                                    f"measured windows) is below the minimum {wanted}", mean / 100, rank)
    return GateResult(GateStatus.PASS, minimum, f"{case_id}: GPU utilization {mean:.1f}%{where}, minimum {wanted}",
                      mean / 100, rank)


def combine(verdict: Judgement, scale: Scaling | None, scaling_note: str | None, gate: GateResult | None,
            notes: Sequence[str]) -> Judgement:
    """A throughput case's judgement from its gates: the throughput's (``verdict``), the scaling gate
    (``scale``, its line ``scaling_note``, or why there are no scaling figures), the utilization gate and
    notes, one fact each.  A gate that failed where the throughput did not leads the message."""
    reasons = list(verdict.reasons)
    gates = list(verdict.gates)
    scaling_leads = scale is not None and scale.failed and not verdict.failed
    if scaling_note:
        reasons.append(Reason(scaling_note, Why.GATE, Status.FAIL if scaling_leads else None, scaling_leads))
    if scale is not None and scale.shared_gpus is None and scale.minimum is not None:
        gates.append(Gate(GateName.SCALING, FAIL if scale.failed else PASS))
    if gate is not None and gate.status is not GateStatus.PASS:
        leads = gate.failed and not verdict.failed and not scaling_leads
        reasons.append(Reason(gate.message, Why.GATE, Status.FAIL if leads else None, leads))
    if gate is not None and gate.status is not GateStatus.NOT_GATED:
        gates.append(Gate(GateName.UTILIZATION, FAIL if gate.failed else PASS))
    reasons.extend(Reason(note) for note in notes)
    failed = verdict.failed or (scale is not None and scale.failed) or (gate is not None and gate.failed)
    return dataclasses.replace(verdict, status=FAIL if failed else verdict.status, reasons=tuple(reasons),
                               gates=tuple(gates))


# -- the sequential verdict (pytest_dlperf.gate.sequential): an estimate with its interval


def headline(case_id: str, est: Estimate, unit: str, expected: Expected) -> str:
    """``resnet50-amp-bs256-gpu8: 5350.2 img/s, 9.2% below 5889.1 (tolerance 5%, 98% CI -11.0..-7.4%, 3 runs)``: the
    headline's text, which its status word leads (:mod:`pytest_dlperf.reporting.verdicts`)."""
    base = expected.throughput
    diff = est.value / base - 1.0
    low, high = est.relative()
    side = f"{fmt_pct(abs(diff))} {'below' if diff < 0 else 'above'}"
    runs = f"{est.runs} run" + ("s" if est.runs != 1 else "")
    return (f"{case_id}: {fmt_value(est.value)} {unit}, {side} {fmt_value(base)} (tolerance "
            f"{fmt_pct(expected.tolerance)}, {round(100 * est.confidence)}% CI {fmt_signed(low, '')}..{fmt_signed(high)}, "
            f"{runs})")


def busy_lines(evidence: Evidence) -> list[Reason]:
    """What the busy runs were, and what became of them: one line."""
    busy = evidence.busy
    if not busy:
        return []
    of = f"{len(busy)} of {len(evidence.figures)} run(s)"
    if evidence.busy_counted:
        return [Reason(f"{of} measured on a busy machine ({busy[-1].busy}), counted: they can only understate it",
                       Why.BUSY)]
    return [Reason(f"{of} not counted: the machine was busy ({busy[-1].busy})", Why.BUSY)]


#: Where an undecided case's runs stopped, for its message.
STOPPED_AT = {StopReason.MAX_RUNS: "after {runs} runs (--dlperf-max-runs)",
              StopReason.TIME_BUDGET: "at the time budget (dlperf_max_seconds)",
              StopReason.BUSY: "after busy runs in a row", StopReason.FAR_OFF: "after runs cut short far off",
              StopReason.HOST_MOVED: "where the host moved"}


def busy_stop_line(evidence: Evidence) -> Reason:
    return Reason(f"stopped after {len(evidence.busy)} busy runs in a row: run it again when the machine is quiet",
                  Why.BUSY)


@dataclasses.dataclass(frozen=True)
class Judged:
    """What every throughput judgement is made of: the case, its evidence, its unit, what it is judged against,
    whether a baseline is required and the run budget, and the lines every message ends with (busy runs, probes,
    the baseline's source)."""

    case_id: str
    evidence: Evidence
    unit: str
    expected: Expected | None
    require_baseline: bool
    max_runs: int | None

    @property
    def source(self) -> list[Reason]:
        return ([Reason(f"baseline: {self.expected.source}", Why.SOURCE)]
                if self.expected is not None and self.expected.source else [])

    @property
    def tail(self) -> list[Reason]:
        return [*busy_lines(self.evidence), *(Reason(p, Why.PROBE) for p in self.evidence.probes), *self.source]


def _judgement(status: Status, reasons: list[Reason], difference: float | None = None, *, undecided: bool = False,
               beyond: str | None = None) -> Judgement:
    return Judgement(status, tuple(reasons), (Gate(GateName.THROUGHPUT, status),), difference, undecided, beyond)


def judge_evidence(case_id: str, evidence: Evidence, unit: str, expected: Expected | None, *,
                   require_baseline: bool = False, max_runs: int | None = None) -> Judgement:
    """The throughput judgement from the runs' evidence (:class:`pytest_dlperf.gate.evidence.Evidence`).

    Its headline says the verdict and the figures (:func:`headline`); each reason after it one fact: why it is
    undecided and what would decide it, the busy runs, what the host probes say, the baseline's source.
    Undecided at the budget: INCONCLUSIVE, ``undecided`` and, where the estimate lies below the threshold,
    ``beyond``; whether that fails is the session's policy (:func:`pytest_dlperf.gate.policy.settle`), applied
    once for every kind.  ``max_runs``: the budget, for the advice on more runs.
    """
    judged = Judged(case_id, evidence, unit, expected, require_baseline, max_runs)
    if evidence.estimate is None:
        return _all_busy(judged)
    if expected is None:
        return _no_baseline(judged, evidence.estimate)
    if evidence.stopped == StopReason.FAR_OFF:
        return _far_off(judged, evidence.estimate, expected)
    return DECIDED.get(evidence.decision, _undecided)(judged, evidence.estimate, expected)


def _all_busy(j: Judged) -> Judgement:
    """No run counted: every one was measured on a busy machine."""
    busy, expected = j.evidence.busy, j.expected
    value = j.evidence.busy_estimate
    diff = value / expected.throughput - 1.0 if expected is not None else None
    stopped = [busy_stop_line(j.evidence)] if j.evidence.stopped == StopReason.BUSY else []
    reasons = [Reason(f"{j.case_id}: busy: {len(busy)} run(s) measured {fmt_value(value)} {j.unit}, none counted",
                      Why.HEADLINE, Status.INCONCLUSIVE),
               Reason(f"the machine was busy: {busy[-1].busy}", Why.BUSY), *stopped,
               *(Reason(p, Why.PROBE) for p in j.evidence.probes), *j.source]
    return _judgement(Status.INCONCLUSIVE, reasons, diff, undecided=True)


def _no_baseline(j: Judged, est: Estimate) -> Judgement:
    status = FAIL if j.require_baseline else NO_BASELINE
    tail = " and dlperf_require_baseline is set" if j.require_baseline else ""
    runs = f" ({est.runs} runs)" if est.runs > 1 else ""
    reasons = [Reason(f"{j.case_id}: {fmt_value(est.value)} {j.unit}{runs}, no baseline{tail}", Why.HEADLINE,
                      FAIL if j.require_baseline else None)]
    busy = j.evidence.busy
    if busy and est.runs == len(busy):  # every run busy, none to leave out: the figure is theirs
        reasons.append(Reason(f"measured on a busy machine ({busy[-1].busy})", Why.BUSY))
    return _judgement(status, reasons)


def _regression(j: Judged, est: Estimate, expected: Expected) -> Judgement:
    threshold = expected.throughput * (1 - expected.tolerance)
    reasons = [Reason(headline(j.case_id, est, j.unit, expected), Why.HEADLINE, FAIL),
               Reason(f"its whole interval is below the threshold {fmt_value(threshold)} {j.unit}", Why.EVIDENCE),
               *j.tail]
    return _judgement(FAIL, reasons, est.value / expected.throughput - 1.0)


def _far_off(j: Judged, est: Estimate, expected: Expected) -> Judgement:
    """Runs cut short far off the baseline (:mod:`.far`): a regression without waiting for whole runs."""
    base, tol = expected.throughput, expected.tolerance
    diff = est.value / base - 1.0
    cut = len(j.evidence.far)
    floor = far.floor(base, tol)
    reasons = [Reason(f"{j.case_id}: {fmt_value(est.value)} {j.unit}, {fmt_pct(-diff)} below {fmt_value(base)} "
                      f"(tolerance {fmt_pct(tol)}): far off, {est.runs} run{'s' if est.runs != 1 else ''} in a row "
                      f"cut short", Why.HEADLINE, FAIL),
               Reason(f"each trained under {fmt_value(floor)} {j.unit}, half the threshold "
                      f"{fmt_value(base * (1 - tol))}, while no other process kept the machine busy: no noise of a "
                      f"quiet machine reaches that far, so they were stopped before their end ({cut} of "
                      f"{len(j.evidence.figures)} run(s) cut)", Why.EVIDENCE), *j.tail]
    return _judgement(FAIL, reasons, diff)


def _improved(j: Judged, est: Estimate, expected: Expected) -> Judgement:
    reasons = [Reason(headline(j.case_id, est, j.unit, expected), Why.HEADLINE, IMPROVED),
               Reason("faster than the tolerance: update the baseline (dlperf baseline update FILE --from these "
                      "results, or --dlperf-save-baseline)", Why.EVIDENCE), *j.tail]
    return _judgement(IMPROVED, reasons, est.value / expected.throughput - 1.0)


def _varies(est: Estimate) -> str:
    noise = math.expm1(est.sigma)
    return (f"runs and the baseline's {est.baseline_runs} vary {fmt_pct(noise)} (CV)" if est.baseline_runs
            else f"runs vary {fmt_pct(noise)} (CV)")


def _passed(j: Judged, est: Estimate, expected: Expected) -> Judgement:
    base, tol = expected.throughput, expected.tolerance
    reasons = [Reason(headline(j.case_id, est, j.unit, expected), Why.HEADLINE, PASS)]
    if est.low < base * (1 - tol):  # passed on the estimate, the interval ruling out ruled_out() (evidence.decide)
        reasons.append(Reason(f"within {fmt_pct(WITHIN * tol)} by its estimate; its interval rules out a slowdown "
                              f"over {fmt_pct(-(est.low / base - 1))}, not one of {fmt_pct(tol)}: its {_varies(est)}",
                              Why.EVIDENCE))
    return _judgement(PASS, [*reasons, *j.tail], est.value / base - 1.0)


def _what_would_decide(j: Judged, est: Estimate, expected: Expected, below: bool) -> Reason:
    """Why the runs stopped undecided, and what would decide the case."""
    tol, threshold = expected.tolerance, expected.throughput * (1 - expected.tolerance)
    at = STOPPED_AT.get(j.evidence.stopped, str(j.evidence.stopped)).format(runs=len(j.evidence.figures))
    needed = runs_to_decide(est, tol)
    if needed is None:
        would = (f"no number of runs would decide it against a baseline of {est.baseline_runs} runs: save the "
                 f"baseline again with more (--dlperf-runs), on a quieter machine, or ask for a wider "
                 f"--dlperf-tolerance")
    else:
        more = f", more than --dlperf-max-runs {j.max_runs}" if j.max_runs is not None and needed > j.max_runs else ""
        would = f"about {needed} runs would decide it{more}"
    goal = (f"to show it below the threshold {fmt_value(threshold)} {j.unit}" if below else
            f"to rule out a slowdown over {fmt_pct(ruled_out(tol))}" if near(est, tol) else
            f"to show it above the threshold {fmt_value(threshold)} {j.unit}")
    caught = could_catch(est, tol)
    caught = (f"; runs like these catch a slowdown of {fmt_pct(caught)} or more {round(10 * CAUGHT_POWER)} times "
              f"in 10, not one of {fmt_pct(tol)}" if caught is not None else "")
    return Reason(f"undecided {at}: too noisy for {fmt_pct(tol)} here ({_varies(est)}) {goal}; {would}{caught}",
                  Why.EVIDENCE)


def _undecided(j: Judged, est: Estimate, expected: Expected) -> Judgement:
    base, diff = expected.throughput, est.value / expected.throughput - 1.0
    threshold = base * (1 - expected.tolerance)
    if j.evidence.unconfirmed:  # a regression at its look's boundary, from fewer runs than a regression needs
        at = STOPPED_AT[StopReason(j.evidence.stopped)].format(runs=len(j.evidence.figures))
        reasons = [Reason(headline(j.case_id, est, j.unit, expected), Why.HEADLINE, FAIL),
                   Reason(f"its whole interval is below the threshold {fmt_value(threshold)} {j.unit}, from "
                          f"{est.runs} run{'s' if est.runs != 1 else ''}: not confirmed by a second (the runs "
                          f"stopped {at})", Why.EVIDENCE), *j.tail]
        return _judgement(FAIL, reasons, diff)
    below = est.value < threshold
    if j.evidence.stopped == StopReason.BUSY:
        why = busy_stop_line(j.evidence)
    elif j.evidence.stopped == StopReason.HOST_MOVED:
        why = Reason(f"undecided: as measured it is {'below' if below else 'within'} the threshold "
                     f"{fmt_value(threshold)} {j.unit}, on the host's scale it is not, and no run more can tell the "
                     "code's change from the host's: save the baseline again on this host, or judge against the last "
                     "good build in pairs (--dlperf-against last-good)", Why.EVIDENCE)
    else:
        why = _what_would_decide(j, est, expected, below)
    reasons = [Reason(headline(j.case_id, est, j.unit, expected), Why.HEADLINE, Status.INCONCLUSIVE), why, *j.tail]
    return _judgement(Status.INCONCLUSIVE, reasons, diff, undecided=True, beyond="below" if below else None)


#: The verdict of each decision; an undecided case's is :func:`_undecided`.
DECIDED = {Decision.REGRESSION: _regression, Decision.IMPROVED: _improved, Decision.PASS: _passed}
