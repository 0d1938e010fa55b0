"""``dlperf bmf RESULTS``: a results file in the Bencher Metric Format, for ``bencher run --adapter json``.

Bencher (https://bencher.dev) tracks custom benchmarks given as BMF JSON: ``{benchmark: {measure: {"value": x,
"lower_value": lo, "upper_value": hi}}}``.  Each case with a figure is a benchmark named by its id; its measures:

* ``throughput``: the case's estimate in its unit (img/s, seq/s, tokens/s), with its 98% interval as the lower and
  upper values where its runs gave one;
* ``scaling-efficiency``: a multi-GPU case's speedup over one GPU divided by its GPU count.

Cases without a figure (skipped, crashed, a rank-only node) are left out.  The document is checked against
``schemas/bmf.schema.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..results.case import CaseResult


def document(cases: Sequence[CaseResult]) -> dict[str, dict[str, dict[str, float]]]:
    """The BMF document of ``cases``."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for case in cases:
        if case.throughput is None or not math.isfinite(case.throughput):
            continue
        metric: dict[str, float] = {"value": case.throughput}
        estimate = case.evidence.estimate if case.evidence is not None else None
        if estimate is not None and estimate.runs > 1 and math.isfinite(estimate.low) and math.isfinite(estimate.high):
            metric.update(lower_value=estimate.low, upper_value=estimate.high)
        measures: dict[str, Any] = {"throughput": metric}
        if case.scaling is not None and math.isfinite(case.scaling.efficiency):
            measures["scaling-efficiency"] = {"value": case.scaling.efficiency}
        out[case.id] = measures
    return out
