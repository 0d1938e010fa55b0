"""Change points in a case's nightly figures: where its level stepped, by how much, how surely.

The method is E-divisive's, as Apache Otava (formerly Hunter) and MongoDB's
signal-processing-algorithms run it on nightly performance figures
(https://arxiv.org/abs/2003.00584): split the series where the split best separates the two
sides, keep the split only when a permutation test finds it significant, and go on splitting
both sides until no split is.  Here:

- the split of a segment is ruptures' binary segmentation with the least-squares cost
  (``ruptures.Binseg``, https://centre-borelli.github.io/ruptures-docs/): the split that most
  reduces the squared deviations from each side's mean, i.e. a step in the mean.  The cost is
  ruptures' ``l2`` computed from cumulative sums (:class:`_CostL2Sums`, the same values as
  ``CostL2`` in constant time per segment instead of a pass over it);
- its significance is a permutation test (:func:`scipy.stats.permutation_test`) of the same
  statistic maximized over every admissible split, so that the search for the best split is
  part of the null distribution (as E-divisive's own test).  It is curtailed (Besag and Clifford,
  "Sequential Monte Carlo p-values", Biometrika 78(2), 1991): the first ``FIRST_PERMUTATIONS``
  permutations stop it once ``ALPHA`` is out of reach whatever the rest would give, so a segment
  without a change costs a tenth of the test; a split that may be significant gets all
  ``PERMUTATIONS``, and the decision is the one the full test would take on the same draws;
- the step's size is the relative difference of the two sides' means, with the 95% interval of
  Welch's t-test (:func:`scipy.stats.ttest_ind`, unequal variances);
- a slow drift, which bisection reports as a step somewhere in its middle, is also measured as a
  trend: the Theil-Sen slope (:func:`scipy.stats.theilslopes`) with Kendall's tau test.

:func:`newest_step` is ``--dlperf-history-gate``'s test: do the newest 1 to 3 figures sit
significantly below the level since the last change point (one-sided Student t-test, Bonferroni
over the 3)?  A step is caught the night it happens when it is large against the noise, and
within three nights when it is smaller.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: Significance level of a change point (each split's permutation test).
ALPHA = 0.01
#: Fewest figures on either side of a change point.
MIN_SIZE = 3
#: Permutations of a split's test: p-values resolve to 1/1000.
PERMUTATIONS = 999
#: The first stage of the curtailed test: after these, a split whose p-value cannot reach ALPHA stops.
FIRST_PERMUTATIONS = 99
#: The gate looks at the newest 1 .. NEWEST figures as the start of a step ...
NEWEST = 3
#: ... against at least this many figures before them.
MIN_BEFORE = 5


def missing(what: str) -> str | None:
    """Why ``what`` cannot find change points here (ruptures or scipy missing), or None when it can."""
    import importlib.util

    absent = [name for name in ("ruptures", "scipy") if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return f"{what} needs {' and '.join(absent)}: pip install 'pytest-dlperf[history]'"


@dataclasses.dataclass(frozen=True)
class Step:
    """A change point: the series' level from ``before`` to ``after`` at ``index`` (the first figure after it)."""

    index: int
    before: float  # the mean of the figures since the previous change point
    after: float  # the mean of the figures up to the next one
    change: float  # after / before - 1
    low: float  # the 95% interval of ``change``
    high: float
    pvalue: float

    @property
    def down(self) -> bool:
        return self.change < 0

    def describe(self) -> str:
        return (f"{100 * self.change:+.1f}% [{100 * self.low:+.1f}%, {100 * self.high:+.1f}%] "
                f"(p={self.pvalue:.3g})")


@dataclasses.dataclass(frozen=True)
class Trend:
    """The Theil-Sen slope of a series, per figure, relative to its first fitted value."""

    slope: float  # relative change per figure
    total: float  # relative change over the series
    pvalue: float  # Kendall's tau test of a monotonic trend
    count: int

    def describe(self) -> str:
        return (f"{100 * self.total:+.1f}% over {self.count} sessions ({100 * self.slope:+.2f}%/session, "
                f"Kendall p={self.pvalue:.2g})")


def _split_gain(x: np.ndarray, axis: int = -1, min_size: int = MIN_SIZE) -> np.ndarray:
    """The largest reduction of squared deviations that one split of ``x`` achieves (vectorized)."""
    import numpy as np
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    n = x.shape[-1]
    k = np.arange(min_size, n - min_size + 1)
    csum = np.cumsum(x, axis=-1)
    total = csum[..., -1:]
    left = csum[..., k - 1] / k
    right = (total - csum[..., k - 1]) / (n - k)
    return np.max(k * (n - k) / n * (left - right) ** 2, axis=-1)


@functools.cache
def _cost_l2_sums():
    """ruptures' ``l2`` cost (a segment's squared deviations from its mean) from cumulative sums."""
    from ruptures.base import BaseCost

    class _CostL2Sums(BaseCost):
        model = "l2-sums"
        min_size = 1

        def fit(self, signal):
            import numpy as np
            x = self.signal = np.asarray(signal, dtype=float).reshape(len(signal), -1)
            zero = np.zeros((1, x.shape[1]))
            self.sums = np.concatenate([zero, np.cumsum(x, axis=0)])
            self.squares = np.concatenate([zero, np.cumsum(x * x, axis=0)])
            return self

        def error(self, start, end):
            total = self.sums[end] - self.sums[start]
            return float(((self.squares[end] - self.squares[start]) - total * total / (end - start)).sum())

    return _CostL2Sums


def _best_split(segment: np.ndarray, min_size: int) -> int:
    import ruptures

    cost = _cost_l2_sums()()
    algo = ruptures.Binseg(custom_cost=cost, min_size=min_size, jump=1).fit(segment.reshape(-1, 1))
    return int(algo.predict(n_bkps=1)[0])


def _split_pvalue(segment: np.ndarray, min_size: int, seed: int, alpha: float = ALPHA) -> float:
    """The permutation p-value of the segment's best split, curtailed once ``alpha`` is out of reach.

    The first ``FIRST_PERMUTATIONS`` permutations: where so many of them reach the observed gain
    that the full test's p-value, ``(exceeding + 1) / (PERMUTATIONS + 1)``, would be above
    ``alpha`` even if none of the rest did, the test stops with the first stage's own p-value;
    otherwise the rest are drawn and the p-value is the full test's.
    """
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(seed)
    observed = float(_split_gain(segment, min_size=min_size))
    tie = abs(observed) * 1e-12  # permutations equal to the observed gain up to rounding count as reaching it

    def exceeding(resamples: int) -> int:
        result = stats.permutation_test(
            (segment,), lambda x, axis: _split_gain(x, axis, min_size), permutation_type="pairings",
            vectorized=True, n_resamples=resamples, alternative="greater", rng=rng)
        return int(np.sum(result.null_distribution >= observed - tie))

    first = exceeding(FIRST_PERMUTATIONS)
    if (first + 1) / (PERMUTATIONS + 1) > alpha:
        return (first + 1) / (FIRST_PERMUTATIONS + 1)
    rest = exceeding(PERMUTATIONS - FIRST_PERMUTATIONS)
    return (first + rest + 1) / (PERMUTATIONS + 1)


def find(values: Sequence[float], *, alpha: float = ALPHA, min_size: int = MIN_SIZE) -> list[Step]:
    """The significant change points of a series, in order, each with its step and interval."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    found: list[tuple[int, float]] = []
    segments = [(0, len(x))]
    while segments:
        start, end = segments.pop()
        if end - start < 2 * min_size:
            continue
        segment = x[start:end]
        if np.ptp(segment) == 0:
            continue
        split = _best_split(segment, min_size)
        pvalue = _split_pvalue(segment, min_size, seed=start * 7919 + end, alpha=alpha)
        if pvalue <= alpha:
            found.append((start + split, pvalue))
            segments += [(start, start + split), (start + split, end)]
    found.sort()
    bounds = [0] + [i for i, _ in found] + [len(x)]
    return [_step(x[bounds[n]:index], x[index:bounds[n + 2]], index, pvalue)
            for n, (index, pvalue) in enumerate(found)]


def _step(before: np.ndarray, after: np.ndarray, index: int, pvalue: float) -> Step:
    import numpy as np
    from scipy import stats

    level = float(np.mean(before))
    interval = stats.ttest_ind(after, before, equal_var=False).confidence_interval(0.95)
    return Step(index, level, float(np.mean(after)), float(np.mean(after)) / level - 1,
                float(interval.low) / level, float(interval.high) / level, pvalue)


def trend(values: Sequence[float]) -> Trend | None:
    """The series' monotonic trend (Theil-Sen slope, Kendall's tau); None for fewer than 4 figures."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < 4 or np.ptp(x) == 0:
        return None
    order = np.arange(len(x))
    slope, intercept, _, _ = stats.theilslopes(x, order)
    tau = stats.kendalltau(order, x)
    first = intercept if intercept else float(np.mean(x))
    return Trend(slope / first, slope * (len(x) - 1) / first, float(tau.pvalue), len(x))


def newest_step(values: Sequence[float], *, alpha: float = ALPHA, newest: int = NEWEST,
                min_before: int = MIN_BEFORE, steps: Sequence[Step] | None = None) -> Step | None:
    """A significant downward step that the newest 1..``newest`` figures start, or None.

    Each newest k is tested, one-sided, against the figures since the last change point before
    them (Student's t-test; for k = 1 this is the prediction interval of one new figure); the
    smallest p-value, times ``newest`` (Bonferroni), must be at most ``alpha``, and the newest
    figure must be below that level.  ``steps``: the series' change points (:func:`find`), when known.
    """
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < min_before + 1:
        return None
    # The level is that since the last change point before the newest figures (one that they
    # start themselves, found with MIN_SIZE of them, is the step under test).
    steps = find(x, alpha=alpha) if steps is None else steps
    start = max([s.index for s in steps if s.index < len(x) - newest], default=0)
    best: Step | None = None
    for k in range(1, newest + 1):
        before = x[start:len(x) - k]
        if len(before) < min_before or x[-1] >= np.mean(before):
            continue
        after = x[-k:]
        test = stats.ttest_ind(after, before, equal_var=True, alternative="less")
        pvalue = min(1.0, float(test.pvalue) * newest)
        if pvalue <= alpha and (best is None or pvalue < best.pvalue):
            level = float(np.mean(before))
            interval = stats.ttest_ind(after, before, equal_var=True).confidence_interval(0.95)
            best = Step(len(x) - k, level, float(np.mean(after)), float(np.mean(after)) / level - 1,
                        float(interval.low) / level, float(interval.high) / level, pvalue)
    return best
