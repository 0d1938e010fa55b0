"""Verdicts: the gates of a case and the message that reports them.

* the throughput gate (:func:`judge_evidence`): the runs' interval against ``baseline x (1 - tolerance)``
  (:mod:`pytest_dlperf.gate.sequential` decides when to stop);
* the scaling gate (:func:`scaling`): an N-rank case's efficiency against a minimum;
* the utilization gate (:func:`utilization_gate`): the lowest GPU's mean utilization;
* :func:`compose_message`: the case's one message, what failed first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..results.case import Expected, GateResult, GateStatus, Scaling, Status
from ..results.telemetry import gpu_utilizations
from .evidence import Decision, Estimate, Evidence, StopReason, ruled_out, runs_to_decide
from .format import fmt_pct, fmt_signed, fmt_value

PASS, IMPROVED, NO_BASELINE, FAIL = Status.PASS, Status.IMPROVED, Status.NO_BASELINE, Status.FAIL
__all__ = ["PASS", "IMPROVED", "NO_BASELINE", "FAIL", "Expected", "Scaling", "Verdict", "scaling",
           "scaling_message", "utilization_gate", "compose_message"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: Status
    message: str
    difference: float | None = None  # measured / baseline - 1
    inconclusive: bool = False  # undecided at the budget (and failed by --dlperf-inconclusive)

    @property
    def failed(self) -> bool:
        return self.status == FAIL


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
                                                         "telemetry is off (--dlperf-no-telemetry)")
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


#: How the lines after a message's first begin: one fact each.
REASON = "\n  "


def compose_message(verdict: Verdict, scale: Scaling | None, scaling_note: str | None, gate: GateResult | None,
                    notes: Sequence[str]) -> str:
    """A case's message: a first line a person reads in five seconds (the gate that failed first: throughput,
    scaling, utilization), then one fact per line (:data:`REASON`): the throughput verdict's reasons, the
    scaling part (:func:`scaling_message`, or why there are no scaling figures), the utilization gate, notes.
    """
    first, *reasons = verdict.message.split(REASON)
    parts = list(reasons)
    if scaling_note:
        parts.append(scaling_note)
    if gate is not None and gate.status is not GateStatus.PASS:
        parts.append(gate.message)
    parts.extend(notes)
    lead = None
    if scale is not None and scale.failed and not verdict.failed:
        lead = scaling_note  # the scaling gate is what failed: lead with it
    elif gate is not None and gate.failed and not verdict.failed:
        lead = gate.message
    if lead is not None:
        parts.remove(lead)
        parts.insert(0, first)
        first = lead if lead.startswith("FAIL ") else f"FAIL {lead}"
    return REASON.join([first, *parts])


# -- the sequential verdict (pytest_dlperf.gate.sequential): an estimate with its interval


#: ``--dlperf-inconclusive``: which inconclusive cases fail the session.
INCONCLUSIVE_POLICIES = ("below", "fail", "pass")


def inconclusive_fails(policy: str, beyond_threshold: bool) -> bool:
    """Whether an undecided case fails under ``--dlperf-inconclusive`` ``policy``: always (``fail``), never
    (``pass``), or when its estimate lies on the wrong side of the threshold (``below``)."""
    return policy == "fail" or (policy == "below" and beyond_threshold)


def headline(word: str, case_id: str, est: Estimate, unit: str, expected: Expected) -> str:
    """``FAIL resnet50-amp-bs256-gpu8: 5350.2 img/s, 9.2% below 5889.1 (tolerance 5%, 98% CI -11.0..-7.4%, 3 runs)``."""
    base = expected.throughput
    diff = est.value / base - 1.0
    low, high = est.relative()
    side = f"{fmt_pct(abs(diff))} {'below' if diff < 0 else 'above'}"
    runs = f"{est.runs} run" + ("s" if est.runs != 1 else "")
    return (f"{word} {case_id}: {fmt_value(est.value)} {unit}, {side} {fmt_value(base)} (tolerance "
            f"{fmt_pct(expected.tolerance)}, {round(100 * est.confidence)}% CI {fmt_signed(low, '')}..{fmt_signed(high)}, "
            f"{runs})")


def busy_lines(evidence: Evidence) -> list[str]:
    """What the busy runs were, and what became of them: one line."""
    busy = evidence.busy
    if not busy:
        return []
    of = f"{len(busy)} of {len(evidence.figures)} run(s)"
    if evidence.busy_counted:
        return [f"{of} measured on a busy machine ({busy[-1].busy}), counted: they can only understate it"]
    return [f"{of} not counted: the machine was busy ({busy[-1].busy})"]


#: Where an undecided case's runs stopped, for its message.
STOPPED_AT = {StopReason.MAX_RUNS: "after {runs} runs (--dlperf-max-runs)",
              StopReason.TIME_BUDGET: "at the time budget (--dlperf-max-seconds)",
              StopReason.BUSY: "after busy runs in a row"}


def busy_stop_line(evidence: Evidence) -> str:
    return f"stopped after {len(evidence.busy)} busy runs in a row: run it again when the machine is quiet"


@dataclasses.dataclass(frozen=True)
class Judged:
    """What every throughput verdict's message is made of: the case, its unit, what it is judged against, the
    policy for undecided cases and the lines every message ends with (busy runs, probes, the baseline's source)."""

    case_id: str
    evidence: Evidence
    unit: str
    expected: Expected | None
    require_baseline: bool
    inconclusive: str
    max_runs: int | None

    @property
    def source(self) -> list[str]:
        return [f"baseline: {self.expected.source}"] if self.expected is not None and self.expected.source else []

    @property
    def tail(self) -> list[str]:
        return [*busy_lines(self.evidence), *self.evidence.probes, *self.source]


def judge_evidence(case_id: str, evidence: Evidence, unit: str, expected: Expected | None, *,
                   require_baseline: bool = False, inconclusive: str = "pass", max_runs: int | None = None) -> Verdict:
    """The throughput verdict from the runs' evidence (:class:`pytest_dlperf.gate.evidence.Evidence`).

    The message's first line says the verdict and the figures (:func:`headline`); each line after it
    (:data:`REASON`) one fact: why it is undecided and what would decide it, the busy runs, what the
    host probes say, the baseline's source.  Undecided at the budget: INCONCLUSIVE, which fails under
    ``inconclusive="fail"``, and under ``"below"`` when the estimate is below the threshold ("not
    confirmed"); never under ``"pass"`` (the default: an unchanged case on a noisy host must not fail,
    and the message says what would decide it).  ``max_runs``: the budget, for the advice on more runs.
    """
    judged = Judged(case_id, evidence, unit, expected, require_baseline, inconclusive, max_runs)
    if evidence.estimate is None:
        return _all_busy(judged)
    if expected is None:
        return _no_baseline(judged, evidence.estimate)
    return DECIDED.get(evidence.decision, _undecided)(judged, evidence.estimate, expected)


def _all_busy(j: Judged) -> Verdict:
    """No run counted: every one was measured on a busy machine."""
    busy, expected = j.evidence.busy, j.expected
    value = j.evidence.busy_estimate
    failed = inconclusive_fails(j.inconclusive, False)  # no estimate counted: none beyond the threshold
    diff = value / expected.throughput - 1.0 if expected is not None else None
    stopped = [busy_stop_line(j.evidence)] if j.evidence.stopped == StopReason.BUSY else []
    lines = [f"{'FAIL' if failed else 'INCONCLUSIVE'} {j.case_id}: busy: {len(busy)} run(s) measured "
             f"{fmt_value(value)} {j.unit}, none counted",
             f"the machine was busy: {busy[-1].busy}", *stopped, *j.evidence.probes, *j.source]
    if failed:
        lines.append("fails: --dlperf-inconclusive fail")
    return Verdict(FAIL if failed else Status.INCONCLUSIVE, REASON.join(lines), diff, inconclusive=True)


def _no_baseline(j: Judged, est: Estimate) -> Verdict:
    status = FAIL if j.require_baseline else NO_BASELINE
    tail = " and --dlperf-require-baseline is set" if j.require_baseline else ""
    runs = f" ({est.runs} runs)" if est.runs > 1 else ""
    lines = [f"{'FAIL ' if j.require_baseline else ''}{j.case_id}: {fmt_value(est.value)} {j.unit}{runs}, "
             f"no baseline{tail}"]
    busy = j.evidence.busy
    if busy and est.runs == len(busy):  # every run busy, none to leave out: the figure is theirs
        lines.append(f"measured on a busy machine ({busy[-1].busy})")
    return Verdict(status, REASON.join(lines))


def _regression(j: Judged, est: Estimate, expected: Expected) -> Verdict:
    threshold = expected.throughput * (1 - expected.tolerance)
    lines = [headline("FAIL", j.case_id, est, j.unit, expected),
             f"its whole interval is below the threshold {fmt_value(threshold)} {j.unit}", *j.tail]
    return Verdict(FAIL, REASON.join(lines), est.value / expected.throughput - 1.0)


def _improved(j: Judged, est: Estimate, expected: Expected) -> Verdict:
    lines = [headline("IMPROVED", j.case_id, est, j.unit, expected),
             "faster than the tolerance: update the baseline (dlperf baseline update FILE --from these results, "
             "or --dlperf-save-baseline)", *j.tail]
    return Verdict(IMPROVED, REASON.join(lines), est.value / expected.throughput - 1.0)


def _varies(est: Estimate) -> str:
    noise = math.expm1(est.sigma)
    return (f"runs and the baseline's {est.baseline_runs} vary {fmt_pct(noise)} (CV)" if est.baseline_runs
            else f"runs vary {fmt_pct(noise)} (CV)")


def _passed(j: Judged, est: Estimate, expected: Expected) -> Verdict:
    base, tol = expected.throughput, expected.tolerance
    lines = [headline("PASS", j.case_id, est, j.unit, expected)]
    if est.low < base * (1 - tol):  # passed on the estimate, the interval ruling out ruled_out() (evidence.decide)
        lines.append(f"within {fmt_pct(tol)} by its estimate; its interval rules out a slowdown over "
                     f"{fmt_pct(-(est.low / base - 1))}, not one of {fmt_pct(tol)}: its {_varies(est)}")
    return Verdict(PASS, REASON.join([*lines, *j.tail]), est.value / base - 1.0)


def _what_would_decide(j: Judged, est: Estimate, expected: Expected, below: bool) -> str:
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
            f"to rule out a slowdown over {fmt_pct(ruled_out(tol))}")
    return f"undecided {at}: too noisy for {fmt_pct(tol)} here ({_varies(est)}) {goal}; {would}"


def _undecided(j: Judged, est: Estimate, expected: Expected) -> Verdict:
    base, diff = expected.throughput, est.value / expected.throughput - 1.0
    threshold = base * (1 - expected.tolerance)
    if j.evidence.unconfirmed:  # a regression at its look's boundary, from fewer runs than a regression needs
        at = STOPPED_AT[StopReason(j.evidence.stopped)].format(runs=len(j.evidence.figures))
        lines = [headline("FAIL", j.case_id, est, j.unit, expected),
                 f"its whole interval is below the threshold {fmt_value(threshold)} {j.unit}, from {est.runs} "
                 f"run{'s' if est.runs != 1 else ''}: not confirmed by a second (the runs stopped {at})", *j.tail]
        return Verdict(FAIL, REASON.join(lines), diff)
    below = est.value < threshold
    failed = inconclusive_fails(j.inconclusive, below)
    lines = [headline("FAIL" if failed else "INCONCLUSIVE", j.case_id, est, j.unit, expected)]
    busy = j.evidence.stopped == StopReason.BUSY
    if busy:
        lines.append(busy_stop_line(j.evidence))
    else:
        lines.append(_what_would_decide(j, est, expected, below))
    lines += j.tail
    if failed:
        lines.append("fails: its estimate is below the threshold, not confirmed (--dlperf-inconclusive below)"
                     if j.inconclusive == "below" else "fails: --dlperf-inconclusive fail")
    return Verdict(FAIL if failed else Status.INCONCLUSIVE, REASON.join(lines), diff, inconclusive=True)


def never_decided(verdict: Verdict, streak: int, nights: int) -> Verdict:
    """``verdict``, failed where it is inconclusive and the case's ``streak`` last sessions (in the history store)
    were too, ``nights`` in a row with this one (``--dlperf-inconclusive-nights``): a case that never decides
    would stay green every night while it could be slower by anything its noise hides."""
    if not verdict.inconclusive or verdict.failed or streak + 1 < nights:
        return verdict
    first, *rest = verdict.message.split(REASON)
    line = (f"fails: inconclusive {streak + 1} sessions in a row in the history store (--dlperf-inconclusive-nights "
            f"{nights}): the case is never decided here; make its runs steadier, give it more runs "
            f"(--dlperf-max-runs) or a wider tolerance")
    return Verdict(FAIL, REASON.join(["FAIL" + first.removeprefix("INCONCLUSIVE"), *rest, line]),
                   verdict.difference, inconclusive=True)


#: The verdict of each decision; an undecided case's is :func:`_undecided`.
DECIDED = {Decision.REGRESSION: _regression, Decision.IMPROVED: _improved, Decision.PASS: _passed}
