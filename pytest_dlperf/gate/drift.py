"""The drift between sessions: how far a host's level moves from one session to the next.

The model (on the log scale, throughput being a rate): a run's figure is

    log x_{s,i} = mu + d + u_s + e_{s,i},    u_s ~ N(0, tau^2),  e_{s,i} ~ N(0, sigma^2)

with ``mu`` the case's level on this host, ``d`` the code's change (0 for the baseline), ``u_s`` the session's
offset, shared by all its runs (a host's level moves between sessions: minutes apart in a test, days apart in
a nightly job), and ``e`` the run-to-run noise.  The runs of one session estimate ``sigma``, never ``tau``;
a session compared with a baseline saved in *one* other session differs by ``u_s - u_b`` besides the runs'
noise, so the verdict's interval (:func:`pytest_dlperf.gate.evidence.standard_error`) carries ``2 tau^2``
(one offset each); against a baseline from history, whose figures are sessions (their spread carries the
offsets), ``tau^2`` once.

``tau`` is estimated from what the plugin has (:func:`drift`):

* a history store (``--dlperf-history``): the case's nightly figures, each against the trend: half the mean
  squared successive difference of their logs (von Neumann's, which a slow trend or one step barely moves),
  less each night's own run noise (``s^2 / n`` of its runs), ``nights - 1`` degrees of freedom;
* a case with fewer than :data:`MIN_NIGHTS` nights: the same, pooled over the cases of its machine class;
* otherwise a stated prior, :data:`PRIOR_SHARE` of the tolerance (:func:`prior`), taken as known.  A saved
  baseline spreads its runs over ``dlperf_save_span``: their spread, which the interval pools as ``sigma``,
  already holds the host's moves within those minutes; ``tau`` is what minutes do not see.

The prior is also the least ``tau`` an estimate gives: a history can say a host drifts more than the
tolerance presumes, never less (ten nights' estimate of a small ``tau`` is too uncertain to narrow the
interval on: the simulation's false alarms at the threshold rose to 5% when it could).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Union

from .evidence import Drift

#: The prior drift between sessions, as a share of the tolerance: a fifth.  A tolerance set by hand is what its
#: author expects sessions to agree within; at a fifth, the offsets of a session and a one-session baseline
#: (sd sqrt(2)/5 = 0.28 x tolerance) alone put an unchanged case beyond its threshold once in 10^4 (3.5 sd),
#: and the interval's least half-width (2.33 x 0.28 = 0.66 x tolerance) still lets twice the tolerance fail.
#: Measured: H100 and H200 sessions minutes apart moved 0.5-1% (benchmarks/gpu-runs/2026-11-26-*: a fifth of
#: a 3-5% tolerance); a 2-core CPU VM 5-13% (benchmarks/results/), which only its history can tell.
PRIOR_SHARE = 0.2
#: Nights of a case from which its own history gives tau (else its machine class's, pooled).
MIN_NIGHTS = 5


def prior(tolerance: float) -> Drift:
    """The drift assumed where no history tells: :data:`PRIOR_SHARE` x the tolerance, taken as known."""
    return Drift(math.log1p(PRIOR_SHARE * tolerance), None, f"prior ({PRIOR_SHARE:g} x the tolerance)")


#: A night: its figure, or its figure and its runs' figures (whose spread is the night's own noise).
Night = Union[float, tuple[float, Sequence[float]]]


def _noise(runs: Sequence[float]) -> float:
    """The variance of a night's log figure from its own runs: their log variance / their number (0 for fewer
    than two)."""
    logs = [math.log(v) for v in runs if v and v > 0 and math.isfinite(v)]
    return statistics.variance(logs) / len(logs) if len(logs) >= 2 else 0.0


def successive(nights: Sequence[Night]) -> tuple[float, int]:
    """(sum of squares, degrees of freedom) of the drift between ``nights`` (oldest first): half the squared
    successive differences of their log figures, less each pair's own noise (its nights' runs' spread), at
    least 0; ``len - 1`` of them; (0, 0) for fewer than two."""
    points = [(math.log(f), _noise(r)) for f, r in (n if isinstance(n, tuple) else (n, ()) for n in nights)
              if f and f > 0 and math.isfinite(f)]
    pairs = list(zip(points, points[1:]))
    squares = sum((b - a) ** 2 / 2 - (wa + wb) / 2 for (a, wa), (b, wb) in pairs)
    return max(0.0, squares), len(pairs)


def drift(nights: Sequence[Night] | None, machine_nights: Mapping[str, Sequence[Night]] | None,
          tolerance: float) -> Drift:
    """The drift between sessions of a case whose sessions' figures (oldest first) are ``nights``, on a machine
    class whose cases' are ``machine_nights``: its own where it has :data:`MIN_NIGHTS`, else the class's pooled,
    else the prior; never below the prior."""
    base = prior(tolerance)
    squares, dof = successive(nights or ())
    source = f"this case's {dof + 1} sessions"
    if dof + 1 < MIN_NIGHTS:
        squares, dof = 0.0, 0
        for figures in (machine_nights or {}).values():
            more, more_dof = successive(figures)
            squares, dof = squares + more, dof + more_dof
        source = f"{dof} session-to-session change(s) of this machine class's cases"
        if dof + 1 < MIN_NIGHTS:
            return base
    if squares / dof <= base.tau ** 2:  # no more than the prior: the prior, which the tolerance presumes
        return dataclasses.replace(base, source=f"prior (at least; history: {source})")
    # The successive differences overlap: their mean square has about 2 (k - 1)^2 / (3k - 4) degrees of freedom
    # for k - 1 differences (von Neumann's ratio; 2/3 of the usual variance's).
    return Drift(math.sqrt(squares / dof), 2 * dof ** 2 / (3 * dof - 1), f"history: {source}")
