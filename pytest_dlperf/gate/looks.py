"""Looks paid for: the group-sequential boundary of a verdict that looks at its evidence after each run.

A case is judged after each of up to ``max_looks`` runs (:mod:`.sequential`); a test at one-sided level
``alpha`` on every look would fail a case exactly at its threshold far more often than ``alpha`` (nine looks
at 1%: 3.1% in ``benchmarks/verdict_simulation.py``).  So the looks share ``alpha`` by an *alpha-spending
function* (Lan and DeMets, "Discrete sequential boundaries for clinical trials", Biometrika 70, 1983,
https://doi.org/10.1093/biomet/70.3.659): by look ``k`` of ``K`` (information fraction ``t = k / K``, the
looks taken as equally spaced) at most ``spent(t)`` of ``alpha`` is spent, and the boundary ``c_k`` of look
``k`` is the one whose crossing probability, not having crossed before, is ``spent(t_k) - spent(t_{k-1})``
under the null (the case exactly at its threshold).

The spending function is the O'Brien-Fleming-like one of Lan and DeMets,
``spent(t) = 2 (1 - Phi(z_{1 - alpha/2} / sqrt(t)))``: it spends almost nothing on the first looks, where
one or two runs are all the evidence and one run far from the others is the usual false alarm, and keeps
nearly all of ``alpha`` for the last looks, whose boundary stays close to the fixed-sample one (2.33 at 1%:
about 2.4 at the tenth of ten looks), so the power of the full budget is nearly that of one test.  A
Pocock-like function (``alpha ln(1 + (e - 1) t)``) would stop obvious regressions a run earlier and pay
for it at the end with a boundary near 2.9, where the slowdowns near the tolerance are decided.

The boundaries come from the recursive numerical integration of Armitage, McPherson and Rowe (1969): the
score ``S_k`` (``Z_k sqrt(k)``) is a sum of ``k`` independent standard normal increments; its density on the
continuation region is carried from look to look on a grid, convolved with the next increment.

:func:`boundary` is in **standard-normal units** (the ``z`` of a known-variance test).  A caller whose
spread is estimated converts it at the same tail probability: ``t = -stdtrit(dof, Phi(-z))``
(:func:`pytest_dlperf.gate.evidence.t_boundary`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import special

#: The boundary of a look that spends (next to) nothing: beyond it no run's evidence reaches.
NEVER = 8.0
#: The grid step of the score's density (standard deviations of one increment).
STEP = 0.02


def spent(t: float, alpha: float) -> float:
    """The O'Brien-Fleming-like alpha spent by information fraction ``t`` (0 < t <= 1): ``alpha`` at ``t = 1``."""
    if t >= 1:
        return alpha
    z = special.ndtri(1 - alpha / 2)
    return float(2 * special.ndtr(-z / math.sqrt(t)))


def boundaries(max_looks: int, alpha: float) -> tuple[float, ...]:
    """The one-sided standard-normal boundary of each of ``max_looks`` equally spaced looks at level ``alpha``."""
    if max_looks < 1 or not 0 < alpha < 0.5:
        raise ValueError(f"boundaries: max_looks >= 1 and 0 < alpha < 0.5, not {max_looks}, {alpha}")
    return boundaries_at(tuple(look / max_looks for look in range(1, max_looks + 1)), alpha)


def _grid_mass(grid: np.ndarray, sd: float) -> np.ndarray:
    """The mass of N(0, sd^2) in each grid cell."""
    return special.ndtr((grid + STEP / 2) / sd) - special.ndtr((grid - STEP / 2) / sd)


#: The state after each run of looks computed so far (their boundaries, the score's density on the continuation
#: region, the last fraction, the alpha spent), by (fractions, alpha): looks that start as an earlier run of looks
#: did carry on from its state, as the loop would, so that only their new looks are computed (the same numbers).
_STATES: dict[tuple[tuple[float, ...], float], tuple] = {}
_MAX_STATES = 1024  # each holds a density of 1,000 floats: at most about 8 MB
_START = ((), None, 0.0, 0.0)


@functools.lru_cache(maxsize=1024)
def boundaries_at(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """The one-sided standard-normal boundary of each look at information fractions ``fractions`` (increasing,
    the last at most 1: the share of the planned looks' information each look has) at level ``alpha``.

    On the information scale the score ``S(t) = Z(t) sqrt(t)`` is a Brownian motion (variance ``t``): its
    density on the continuation region is carried from look to look on a grid of :data:`STEP`, convolved with
    the next increment (variance ``t_k - t_{k-1}``)."""
    if not fractions or not 0 < alpha < 0.5 or any(b <= a for a, b in zip(fractions, fractions[1:])) \
            or not 0 < fractions[0] or fractions[-1] > 1 + 1e-9:
        raise ValueError(f"boundaries_at: increasing fractions in (0, 1] and 0 < alpha < 0.5, not {fractions}, "
                         f"{alpha}")
    known = len(fractions)
    while known and (fractions[:known], alpha) not in _STATES:
        known -= 1
    state = _STATES.get((fractions[:known], alpha), _START)
    if len(_STATES) > _MAX_STATES:
        _STATES.clear()
    for look in range(known, len(fractions)):
        state = _next_look(state, fractions[look], alpha)
        _STATES[(fractions[:look + 1], alpha)] = state
    return state[0]


_GRID = np.arange(-NEVER - 2.0, NEVER + 2.0 + STEP / 2, STEP)


def _next_look(state: tuple, t: float, alpha: float) -> tuple:
    """The state after one more look, at information fraction ``t``, from the state after the looks before it."""
    out, density, previous_t, previous = state
    grid = _GRID
    share = spent(t, alpha) - previous
    previous += share
    root = math.sqrt(t)
    if density is None:
        c = NEVER if share < special.ndtr(-NEVER) else min(NEVER, float(-special.ndtri(share)))
    else:
        step_sd = math.sqrt(t - previous_t)

        def crossing(c: float, mass: np.ndarray = density, sd: float = step_sd) -> float:
            return float(np.dot(mass, special.ndtr((grid - c * root) / sd)))  # P(S_{k-1}=u) P(step > c rt - u)

        if crossing(NEVER) >= share:
            c = NEVER
        else:
            low, high = -NEVER, NEVER
            for _ in range(40):  # bisection: crossing() falls as c rises
                mid = (low + high) / 2
                low, high = (mid, high) if crossing(mid) > share else (low, mid)
            c = (low + high) / 2
    if density is None:
        moved = _grid_mass(grid, root)
    else:
        half = int(min(10 * step_sd, NEVER + 2) / STEP)
        kernel = _grid_mass(np.arange(-half, half + 1) * STEP, step_sd)
        moved = np.convolve(density, kernel, mode="same")
    return (*out, c), np.where(grid < c * root, moved, 0.0), t, previous


def boundary(look: int, max_looks: int, alpha: float) -> float:
    """The one-sided critical value, in standard-normal units, of look ``look`` (1-based) of ``max_looks``
    equally spaced looks that together spend ``alpha`` (O'Brien-Fleming-like Lan-DeMets spending): reject at
    that look when the standardized statistic exceeds it.  One look: ``Phi^-1(1 - alpha)``.  A look past the
    plan (``look > max_looks``) gets the last look's boundary."""
    if look < 1:
        raise ValueError(f"boundary: look counts from 1, not {look}")
    values = boundaries(max_looks, alpha)
    return values[min(look, max_looks) - 1]


def boundary_at(fractions: Sequence[float], alpha: float) -> float:
    """The boundary of the last of looks at information ``fractions`` (each rounded to 1/100, at most 1: the
    spending is smooth, and rounded fractions repeat from case to case, so that their boundaries are computed once;
    a look past the plan, its fraction 1 again, gets the boundary of the plan's last look)."""
    rounded: list[float] = []
    for f in fractions:
        f = min(1.0, max(round(f, 2), 0.01))
        if rounded and f <= rounded[-1]:
            break  # past the plan (or two looks within 1/100): the last look's boundary
        rounded.append(f)
    return boundaries_at(tuple(rounded), alpha)[-1]
