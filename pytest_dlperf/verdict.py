"""Verdicts: the gates of a case and the message that reports them.

* the throughput gate (:func:`judge_evidence`): the runs' interval against ``baseline x (1 - tolerance)``
  (:mod:`pytest_dlperf.sequential` decides when to stop);
* the scaling gate (:func:`scaling`): an N-rank case's efficiency against a minimum;
* the utilization gate (:func:`utilization_gate`): the lowest GPU's mean utilization;
* :func:`compose_message`: the case's one message, what failed first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .results import Expected, GateResult, GateStatus, Scaling, Status, gpu_utilizations
from .tolerance import NOISE_SIGMAS

PASS, IMPROVED, NO_BASELINE, FAIL = Status.PASS, Status.IMPROVED, Status.NO_BASELINE, Status.FAIL
__all__ = ["PASS", "IMPROVED", "NO_BASELINE", "FAIL", "Expected", "Scaling", "Verdict", "scaling",
           "scaling_message", "utilization_gate", "compose_message", "fmt_value", "fmt_pct"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: Status
    message: str
    difference: float | None = None  # measured / baseline - 1
    inconclusive: bool = False  # undecided at the budget (and failed by --dlperf-inconclusive)

    @property
    def failed(self) -> bool:
        return self.status == FAIL


def fmt_value(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def fmt_pct(fraction: float) -> str:
    pct = round(fraction * 100, 1)
    return f"{pct:.0f}%" if pct.is_integer() else f"{pct:.1f}%"


#: The kinds of 1-rank reference (:attr:`pytest_dlperf.results.Scaling.reference_kind`).
PLAIN_PROCESS, ONE_RANK_DDP = "plain process", "one-rank DDP"


def scaling(throughput: float, ranks: int, reference: float, reference_source: str,
            minimum: float | None, reference_kind: str | None = None) -> Scaling:
    speedup = throughput / reference
    return Scaling(ranks, reference, reference_source, speedup, speedup / ranks, minimum, reference_kind)


def scaling_message(case_id: str, s: Scaling, unit: str) -> str:
    kind = f" ({s.reference_kind})" if s.reference_kind else ""
    base = (f"scaling efficiency {fmt_pct(s.efficiency)} (speedup {s.speedup:.2f}x on {s.ranks} ranks over "
            f"{fmt_value(s.reference)} {unit} on 1{kind}, from {s.reference_source})")
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


def compose_message(verdict: Verdict, scale: Scaling | None, scaling_note: str | None, gate: GateResult | None,
                    notes: Sequence[str]) -> str:
    """A case's message, its parts in the order of what failed first: throughput, scaling, utilization, notes.

    ``scaling_note``: the scaling part (:func:`scaling_message`, or why there are no scaling figures).
    """
    scale_failed = scale is not None and scale.failed
    parts = [verdict.message]
    if scaling_note:
        parts.append(scaling_note)
    if gate is not None and gate.status is not GateStatus.PASS:
        parts.append(gate.message)
    parts.extend(notes)
    if scale_failed and not verdict.failed:
        parts[0], parts[1] = parts[1], parts[0]  # the scaling gate is what failed: lead with it
    elif gate is not None and gate.failed and not verdict.failed:
        parts.remove(gate.message)
        parts.insert(0, gate.message)
    return "; ".join(parts)


# -- the sequential verdict (pytest_dlperf.sequential): an estimate with its interval


def host_losses(figures, expected: Expected) -> tuple[str, list[str]]:
    """What the host took from the runs that count against the case, as the allowance allows for it: "the
    memory bandwidth its runs lost (up to 9% below the baseline's 10.0 GB/s)", and the core speed likewise;
    and which probes lost ("memory bandwidth", "core speed")."""
    from .evidence import HOST_PROBES

    parts, what = [], []
    for probe in HOST_PROBES:
        reference = getattr(expected, probe.key, None)
        values = [f.probe(probe) for f in figures if f.counts_against and f.allowance > 1.0 and f.probe(probe)]
        lost = [reference / v for v in values if reference and v < reference]
        if lost:
            what.append(probe.what)
            parts.append(f"the {probe.what} its runs lost (up to {fmt_pct(1 - 1 / max(lost))} below the "
                         f"baseline's {reference:.1f} {probe.unit})")
    if parts:
        return " and ".join(parts), what
    most = max((f.allowance for f in figures if f.counts_against), default=1.0)  # references not at hand
    return f"what the host took from its runs (up to {fmt_pct(1 - 1 / most)} below the baseline's)", what


#: ``--dlperf-inconclusive``: which inconclusive cases fail the session.
INCONCLUSIVE_POLICIES = ("below", "fail", "pass")


def inconclusive_fails(policy: str, beyond_threshold: bool) -> bool:
    """Whether an undecided case fails under ``--dlperf-inconclusive`` ``policy``: always (``fail``), never
    (``pass``), or when its estimate lies on the wrong side of the threshold (``below``)."""
    return policy == "fail" or (policy == "below" and beyond_threshold)


def judge_evidence(case_id: str, evidence, unit: str, expected: Expected | None, *, require_baseline: bool = False,
                   inconclusive: str = "below") -> Verdict:
    """The throughput verdict from the runs' evidence (:class:`pytest_dlperf.sequential.Evidence`).

    The message gives the estimate, its interval and the number of runs.  Undecided at the
    budget: INCONCLUSIVE, which fails under ``inconclusive="fail"``, and under ``"below"``
    (the default) when the estimate is below the threshold, saying it was not confirmed, unless
    the memory bandwidth the runs lost explains the shortfall (``evidence.allowed``, the estimate
    allowing for it, is above the threshold): the message says so.
    """
    from .evidence import Decision

    est = evidence.estimate
    busy = evidence.busy
    allowed = getattr(evidence, "allowed", None)
    busy_note = ""
    if busy and getattr(evidence, "busy_counted", False):
        busy_note = (f"; {len(busy)} of {len(evidence.figures)} run(s) measured on a busy machine "
                     f"({busy[-1].busy} during the windows), counted: they can only understate it")
    elif busy:
        # Runs busy for what the host took alone are in the allowed estimate (pytest_dlperf.sequential.assess).
        against = [f for f in busy if f.host_only] if allowed is not None else []
        others = [f for f in busy if f not in against]
        if against:
            busy_note += (f"; {len(against)} of {len(evidence.figures)} run(s) measured while the host's other "
                          f"tenants took its memory bandwidth or core ({against[-1].busy}): counted against it "
                          f"only at their allowed figures")
        if others:
            busy_note += (f"; {len(others)} of {len(evidence.figures)} run(s) not counted: the machine was busy "
                          f"({others[-1].busy} during the windows)")
    if est is None:
        value = evidence.busy_estimate
        failed = inconclusive_fails(inconclusive, False)  # no estimate counted: none beyond the threshold
        diff = value / expected.throughput - 1.0 if expected is not None else None
        return Verdict(FAIL if failed else Status.INCONCLUSIVE,
                       f"{case_id}: inconclusive: the machine was busy ({busy[-1].busy} during the windows); "
                       f"{len(busy)} run(s) measured {fmt_value(value)} {unit}, none counted"
                       + ("; fails: --dlperf-inconclusive fail" if failed else ""), diff, inconclusive=True)
    figure = f"{fmt_value(est.value)} {unit} ({est.interval_text(fmt_value)})"
    if expected is None:
        status = FAIL if require_baseline else NO_BASELINE
        tail = " and --dlperf-require-baseline is set" if require_baseline else ""
        runs = f" ({est.runs} runs)" if est.runs > 1 else ""
        if busy and est.runs == len(busy):  # every run busy, none to leave out: the figure is theirs
            busy_note = f"; measured on a busy machine ({busy[-1].busy} during the windows)"
        return Verdict(status, f"{case_id}: {fmt_value(est.value)} {unit}{runs}, no baseline{tail}{busy_note}")
    base, tol = expected.throughput, expected.tolerance
    diff = est.value / base - 1.0
    source = f"; source: {expected.source}" if expected.source else ""
    detail = f"(tolerance {fmt_pct(tol)}{source})"
    side = f"{fmt_pct(abs(diff))} {'below' if diff < 0 else 'above'} the baseline {fmt_value(base)} {unit}"
    allowed_note, lost = "", []
    if allowed is not None and (evidence.decision is not Decision.PASS):
        losses, lost = host_losses(evidence.figures, expected)
        allowed_note = (f"; allowing for {losses}, {fmt_value(allowed.value)} {unit} "
                        f"({allowed.interval_text(fmt_value)})")
    lost_what = " and ".join(lost) or "memory bandwidth or core speed"
    gain = getattr(evidence, "host_gain", None)
    # A host faster than the baseline's: the figure may overstate the case (a regression stands all the same).
    gain_note = (f"; the host gave its runs more than the baseline's ({gain}): a slowdown may hide behind that "
                 f"(save the baseline again, or take it from history)") if gain else ""
    if evidence.decision is Decision.REGRESSION:
        return Verdict(FAIL, f"{case_id}: {figure} is {side} {detail}{allowed_note}{busy_note}", diff)
    if evidence.decision is Decision.IMPROVED:
        # A gain the host may have given is no figure to save: the next session, in an ordinary minute, would fail.
        advice = ("improved: update the baseline (--dlperf-save-baseline)" if not gain else
                  f"improved, but the host gave its runs more than the baseline's ({gain}): the gain may be the "
                  f"host's; update the baseline from several sessions (dlperf baseline update FILE --from each "
                  f"session's results) or take it from history, not from this session alone")
        return Verdict(IMPROVED, f"{case_id}: {figure} is {side} {detail}; {advice}{busy_note}", diff)
    if evidence.decision is Decision.PASS:
        sign = "+" if diff >= 0 else "-"
        return Verdict(PASS, f"{case_id}: {figure} is within {fmt_pct(tol)} of the baseline {fmt_value(base)} "
                             f"{unit} ({sign}{fmt_pct(abs(diff))}{source}){busy_note}{gain_note}", diff)
    threshold = base * (1 - tol)
    below = est.value < threshold
    explained = below and allowed is not None and allowed.value >= threshold
    why = (f"its interval reaches both sides of the threshold {fmt_value(threshold)} {unit} "
           f"({'the' if evidence.stopped == 'time budget' else 'at the'} {evidence.stopped.replace('-', ' ')})")
    if allowed is not None and est.high < threshold:  # undecided only for the allowance
        why = f"the {lost_what} its runs lost may explain it (at the {evidence.stopped.replace('-', ' ')})"
    text = f"{case_id}: inconclusive: {figure} is {side} {detail}; {why}{allowed_note}{busy_note}{gain_note}"
    # Runs noisier than the tolerance allows for: such a case lands on either side of the threshold by chance
    # (benchmarks/verdict_simulation.py: 5% noise between runs at a 5% tolerance fails 7% of unchanged cases).
    noise = math.expm1(est.sigma)
    if NOISE_SIGMAS * noise > tol:
        text += (f"; its runs vary {fmt_pct(noise)} (CV between runs): a tolerance under "
                 f"{NOISE_SIGMAS} x that ({fmt_pct(NOISE_SIGMAS * noise)}) leaves an unchanged case on either side "
                 f"of the threshold by chance")
    if explained:
        text += (f"; not failed: the {'bandwidth' if lost == ['memory bandwidth'] else lost_what} explains the "
                 f"estimate's shortfall")
    if inconclusive_fails(inconclusive, below and not explained):
        reason = ("the estimate is below the threshold, not confirmed" if below and not explained
                  else "--dlperf-inconclusive fail")
        return Verdict(FAIL, f"{text}; fails: {reason}", diff, inconclusive=True)
    return Verdict(Status.INCONCLUSIVE, text, diff, inconclusive=True)
