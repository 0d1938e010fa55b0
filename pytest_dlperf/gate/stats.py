"""Statistics over measured windows, and how much more one sample of runs spreads than others."""

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


#: The level of the one-sided F test that says one sample spreads more than others (:func:`excess_variance`).
EXCESS_ALPHA = 0.05


def squares(samples: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The squared deviations of ``samples``, each about its own mean, summed, and their degrees of freedom (a sample
    of fewer than two values adds nothing)."""
    kept = [s for s in samples if len(s) >= 2]
    return sum((len(s) - 1) * statistics.variance(s) for s in kept), sum(len(s) - 1 for s in kept)


def within(samples: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The variance of ``samples`` pooled, each about its own mean, and its degrees of freedom (0, 0 with none)."""
    total, dof = squares(samples)
    return (total / dof if dof else 0.0), dof


def excess_variance(wide: Sequence[float], narrow: Sequence[Sequence[float]], alpha: float = EXCESS_ALPHA) -> float:
    """How much more ``wide`` varies than the ``narrow`` samples do, each about its own mean (:func:`within`):
    the difference of their variances where a one-sided F test at ``alpha`` says that it is more, else 0 (as
    where either side has no degree of freedom)."""
    (spread, spread_dof), (inner, inner_dof) = within([wide]), within(narrow)
    if not spread_dof or not inner_dof:
        return 0.0
    from scipy import special

    if inner > 0 and spread / inner <= special.fdtri(spread_dof, inner_dof, 1 - alpha):
        return 0.0
    return max(0.0, spread - inner)
