"""Verdicts: a measured throughput against its baseline entry."""

from __future__ import annotations

import dataclasses

from .stats import Summary

PASS = "pass"
IMPROVED = "improved"
NO_BASELINE = "no-baseline"
FAIL = "fail"


@dataclasses.dataclass(frozen=True)
class Expected:
    throughput: float
    unit: str
    tolerance: float
    source: str | None = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str
    message: str
    difference: float | None = None  # measured / baseline - 1

    @property
    def failed(self) -> bool:
        return self.status == FAIL


def fmt_value(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def fmt_pct(fraction: float) -> str:
    pct = round(fraction * 100, 1)
    return f"{pct:.0f}%" if pct.is_integer() else f"{pct:.1f}%"


def judge(case_id: str, measured: Summary, unit: str, expected: Expected | None, *,
          require_baseline: bool = False, max_cv: float = 0.05) -> Verdict:
    """Compare the median of the windows with ``expected``.

    Below ``baseline * (1 - tolerance)``: FAIL.  Above ``baseline * (1 + tolerance)``:
    PASS, as *improved*.  No baseline: PASS as *no-baseline* (FAIL when one is required).
    A coefficient of variation above ``max_cv`` is noted in the message.
    """
    value = measured.median
    noise = ""
    if measured.n > 1 and measured.cv > max_cv:
        noise = f"; noisy: CV {fmt_pct(measured.cv)} over {measured.n} windows"
    if expected is None:
        status = FAIL if require_baseline else NO_BASELINE
        tail = " and --dlperf-require-baseline is set" if require_baseline else ""
        return Verdict(status, f"{case_id}: {fmt_value(value)} {unit}, no baseline{tail}{noise}")

    base = expected.throughput
    diff = value / base - 1.0
    source = f"; source: {expected.source}" if expected.source else ""
    detail = f"(tolerance {fmt_pct(expected.tolerance)}{source}{noise})"
    if value < base * (1.0 - expected.tolerance):
        return Verdict(FAIL, f"{case_id}: {fmt_value(value)} {unit} is {fmt_pct(-diff)} below the "
                             f"baseline {fmt_value(base)} {unit} {detail}", diff)
    if value > base * (1.0 + expected.tolerance):
        return Verdict(IMPROVED, f"{case_id}: {fmt_value(value)} {unit} is {fmt_pct(diff)} above the "
                                 f"baseline {fmt_value(base)} {unit} {detail}; improved: update the "
                                 f"baseline (--dlperf-save-baseline)", diff)
    sign = "+" if diff >= 0 else "-"
    return Verdict(PASS, f"{case_id}: {fmt_value(value)} {unit} is within {fmt_pct(expected.tolerance)} of the "
                         f"baseline {fmt_value(base)} {unit} ({sign}{fmt_pct(abs(diff))}{source}{noise})", diff)


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Speedup and efficiency of an N-rank case against the same case on one rank."""

    ranks: int
    reference: float  # 1-rank throughput
    reference_source: str  # "this session", "baseline" or "measured for scaling"
    speedup: float
    efficiency: float
    minimum: float | None

    @property
    def failed(self) -> bool:
        return self.minimum is not None and self.efficiency < self.minimum

    def to_dict(self) -> dict[str, float | int | str | None]:
        return dataclasses.asdict(self)


def scaling(throughput: float, ranks: int, reference: float, reference_source: str,
            minimum: float | None) -> Scaling:
    speedup = throughput / reference
    return Scaling(ranks, reference, reference_source, speedup, speedup / ranks, minimum)


def scaling_message(case_id: str, s: Scaling, unit: str) -> str:
    base = (f"scaling efficiency {fmt_pct(s.efficiency)} (speedup {s.speedup:.2f}x on {s.ranks} ranks over "
            f"{fmt_value(s.reference)} {unit} on 1, from {s.reference_source})")
    if s.failed:
        return f"{case_id}: {base} is below the minimum {fmt_pct(s.minimum)}"
    return base
