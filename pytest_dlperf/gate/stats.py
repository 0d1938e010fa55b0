"""Statistics over measured windows."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float
    cv: float

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def summarize(values: Sequence[float]) -> Summary:
    """Median, mean, extremes, sample stdev and coefficient of variation (stdev / mean)."""
    if not values:
        raise ValueError("no values to summarize")
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(
        n=len(values),
        median=statistics.median(values),
        mean=mean,
        min=min(values),
        max=max(values),
        stdev=stdev,
        cv=stdev / mean if mean else 0.0,
    )
