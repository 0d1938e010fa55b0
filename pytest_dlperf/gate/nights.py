"""Undecided nights judged together: what the never-deciding rule decides from before it fails a case.

A case whose runs decide nothing night after night (a host whose runs vary about as much as its tolerance) would
stay green while it could be slower by anything its noise hides; so after ``dlperf_inconclusive_nights`` undecided
nights in a row (:mod:`.policy`) it fails.  But its nights are evidence: each is a session of its own, with its own
offset, against the same saved baseline.  Before failing, the rule judges the last nights together
(:func:`judge`):

* the estimate is the mean of the nights' means on the log scale (each night's offset weighs the same);
* the spread ``sigma`` is pooled within each night and within the baseline's runs (the nights' offsets are not in
  it), never below :data:`~.evidence.FLOOR_CV`;
* the standard error of ``log(estimate / baseline)`` is
  ``sqrt(sigma^2 (sum(1/n_i) / k^2 + 1/m) + tau^2 (1/k + 1))`` for ``k`` nights of ``n_i`` runs against a save of
  ``m`` runs: the nights' offsets average out, the save's does not; where the save's runs spread significantly
  more than the nights' (:func:`.stats.excess_variance`), each night sat in a stretch of the host's moves of its own,
  and the difference goes into ``tau^2`` as one more offset a night;
* the decision is :func:`.evidence.decide`'s at one look.

Where the nights together show a regression, the case fails as one.  Where they pass, or rule out a slowdown of
twice the tolerance (:func:`.evidence.ruled_out`, the slowdown a pass's promise is made at: its noise hides nothing
that large), it stays green, saying so.  Else the never-deciding rule fails it as before.  Only against a saved
baseline: a baseline from history (``--dlperf-baseline-from-history``) is made of these same nights.

Where tonight's host moved since the save (:mod:`.host`: tonight's runs were judged both ways), the nights are
judged both ways too: as measured, and on the host's scale (every night's runs divided by tonight's ratio: a host
that moved usually stays moved).  Only what both ways say counts: a regression both ways fails as one, a pass (or
twice the tolerance ruled out) both ways keeps the case green, and anything else is left to the never-deciding
rule, whose message then says that the host moved.  Judged as measured only, the nights let a host's move decide:
a host faster since the save cleared a slowdown for good, and a slower one failed unchanged code as a regression
(``benchmarks/verdict_simulation.py --three-nights --host 1.15``, ``--host 0.85``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from . import evidence as ev
from .drift import prior
from .stats import excess_variance


@dataclasses.dataclass(frozen=True)
class Nights:
    """The last undecided nights judged together: how many, their estimate and its decision."""

    nights: int
    estimate: ev.Estimate
    decision: ev.Decision
    tolerance: float
    #: Tonight's host speed over the save's where it moved, and the nights judged on its scale; None where not.
    moved: float | None = None
    scaled: Nights | None = None

    @property
    def clears(self) -> bool:
        """Whether the nights together keep the case green: they pass, or rule out twice the tolerance (both ways,
        where the host moved)."""
        est = self.estimate
        return (self.decision in (ev.Decision.PASS, ev.Decision.IMPROVED) or (
            self.decision is ev.Decision.UNDECIDED and ev.rules_out(est, self.tolerance))) and (
            self.scaled is None or self.scaled.clears)

    @property
    def regression(self) -> bool:
        """Whether the nights together show a regression (both ways, where the host moved)."""
        return self.decision is ev.Decision.REGRESSION and (
            self.scaled is None or self.scaled.decision is ev.Decision.REGRESSION)

    def said(self) -> str:
        """What these nights' figures say, as a verb phrase."""
        low = (self.estimate.relative() or (0.0, 0.0))[0]
        if self.decision is ev.Decision.UNDECIDED and ev.rules_out(self.estimate, self.tolerance):
            return f"rule out a slowdown over {100 * -low:.1f}%"
        return {ev.Decision.REGRESSION: "show it below the threshold", ev.Decision.PASS: "pass",
                ev.Decision.IMPROVED: "show it faster than the tolerance"}.get(self.decision, "decide nothing either")

    def line(self, unit: str) -> str:
        """What the nights together say, for the verdict's message."""
        est = self.estimate
        low, high = est.relative() or (0.0, 0.0)
        line = (f"its last {self.nights} nights together ({est.runs} runs): {est.value:.1f} {unit}, "
                f"{100 * (est.value / est.baseline - 1):+.1f}% (98% CI {100 * low:+.1f}..{100 * high:+.1f}%): "
                f"they {self.said()}")
        if self.scaled is None or self.moved is None:
            return line
        way = "slower" if self.moved < 1 else "faster"
        return (f"{line} as measured; on the host's scale (tonight it read {abs(self.moved - 1):.0%} {way} than at "
                f"the save) they {self.scaled.said()}")


def estimate(nights: Sequence[Sequence[float]], baseline: float, baseline_runs: Sequence[float], tolerance: float,
             drift: ev.Drift | None = None) -> ev.Estimate:
    """The nights' runs (``nights``: each night's run figures) together against ``baseline`` (a save of
    ``baseline_runs``), as the module says."""
    groups = [[math.log(v) for v in night if v > 0] for night in nights]
    groups = [g for g in groups if g]
    if not groups:
        raise ValueError("no night with runs to judge together")
    base_logs = [math.log(v) for v in baseline_runs if v > 0]
    sigma, dof = ev.pooled_sigma(groups[0], base_logs, tolerance, more=groups[1:])  # within each night, not between
    k = len(groups)
    runs = k * k / sum(1 / len(g) for g in groups)  # the one sample size whose 1/n is the nights' sum(1/n_i) / k^2
    drift = prior(tolerance) if drift is None else drift
    drift = drift.widened(excess_variance(base_logs, groups) / (1 + k))  # x (1/k + 1) below: a stretch a night, / k
    se, dof = ev.standard_error(sigma, dof, runs, len(base_logs), drift, 1 / k + 1)
    center = statistics.fmean(statistics.fmean(g) for g in groups)
    half = ev.t_quantile(0.5 + ev.CONFIDENCE / 2, dof) * se
    value = math.exp(center)
    return ev.Estimate(value, value * math.exp(-half), value * math.exp(half), sum(map(len, groups)), sigma, dof,
                       baseline, len(base_logs), ev.CONFIDENCE, se, drift.tau, 1 / k + 1)


def judge(nights: Sequence[Sequence[float]], baseline: float, baseline_runs: Sequence[float], tolerance: float,
          drift: ev.Drift | None = None, moved: float | None = None) -> Nights | None:
    """The nights judged together (:func:`estimate`, then :func:`.evidence.decide` at one look), and where the host
    moved (``moved``: tonight's speed over the save's) on its scale too; None where fewer than two nights have
    runs."""
    kept = [night for night in nights if any(v > 0 for v in night)]
    if len(kept) < 2:
        return None
    est = estimate(kept, baseline, baseline_runs, tolerance, drift)
    scaled = None
    if moved is not None:
        scaled = judge([[v / moved for v in night] for night in kept], baseline, baseline_runs, tolerance, drift)
    return Nights(len(kept), est, ev.decide(est, tolerance), tolerance, moved, scaled)


def with_tonight(earlier: Sequence[Sequence[float]], tonight: ev.Evidence, baseline: float,
                 baseline_runs: Sequence[float], tolerance: float, drift: ev.Drift | None = None) -> Nights | None:
    """The streak's ``earlier`` undecided nights (their runs, oldest first) and tonight's counted runs judged
    together (:func:`judge`), on the host's scale too where tonight's host moved."""
    return judge([*earlier, tuple(f.value for f in tonight.counted)], baseline, baseline_runs, tolerance, drift,
                 tonight.moved)
