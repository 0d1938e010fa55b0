"""The critical value of each look of a sequential verdict.

PLACEHOLDER (issue 38): the per-look boundary the verdicts use today, the same one-sided quantile at every
look (``alpha`` = (1 - CONFIDENCE) / 2 = 1%), so that a caller written against the group-sequential
boundary of issue 43 runs unchanged when that one replaces this module.
"""

from __future__ import annotations


def boundary(look: int, max_looks: int, alpha: float) -> float:
    """The one-sided critical quantile (standard normal scale) of look ``look`` (1-based) of at most ``max_looks``
    at overall level ``alpha``: today, ``Phi^-1(1 - alpha)`` at every look (``scipy.special.ndtri``)."""
    if not 1 <= look or not 0 < alpha < 1:
        raise ValueError(f"look {look} of {max_looks} at alpha {alpha}: expected look >= 1 and 0 < alpha < 1")
    from scipy import special

    return float(special.ndtri(1 - alpha))
