"""The paired verdict of an A/B session (``--dlperf-against``): candidate against reference, run in interleaved pairs.

Two environments measured on one machine in one session, alternating, see the same host: whatever the host
does over minutes (its level drifting, a neighbour's load) reaches both sides of a pair alike, and cancels in
their ratio (randomized multiple interleaved trials: Abedi and Brecht, ICPE 2017,
https://doi.org/10.1145/3030207.3030229; duet benchmarking: Bulej et al., ICPE 2020,
https://doi.org/10.1145/3358960.3379132).  So:

* **pairs**: pair ``i`` runs one fresh run of each side, in an order drawn per pair (:func:`pair_order`:
  candidate first or reference first, from the session's seed and ``i``, so that an order is reproducible from
  the seed the results record, and a side never always runs after the other);
* **the figure** of a pair is ``log(candidate / reference)``, each side's run figure being the median of its
  windows (:mod:`.figures`); a pair either of whose runs was busy (:func:`.figures.busy_reason`) is no evidence;
* **the estimate** is the geometric mean of the counted pairs' ratios, its spread the standard deviation of their
  logs pooled with the prior the stored-baseline verdict uses (:func:`.evidence.pooled_sigma`: a tolerance is
  about 3 x the noise its author expects, worth 3 pairs), never below 1%; its interval
  ``mean +- q * sigma / sqrt(n)`` with ``q`` Student's t at the pooled degrees of freedom, two-sided
  :data:`.evidence.CONFIDENCE` as every verdict; no drift between sessions in it (both sides run in this session,
  side by side: the pairing cancels it);
* **no covariate**: the worker's memory probe is timed inside each side's own process, where the candidate's code can
  move it (its own threads or helper processes, its memory binding): a regression on it would read the
  candidate's own slowdown as the host's.  The pairing is what cancels the host (the estimate's regression on the
  probe was removed in ``verdict_rules`` 5: benchmarks/results/2026-11-28-issue-53-paired-rows.md);
* **the decision** is :func:`.evidence.decide`'s, the reference being 1: regression when the interval's top at
  look ``k``'s boundary (:func:`.evidence.t_boundary`: the looks of a case spend the 1% together, as for a stored
  baseline) lies below ``1 - tolerance``, improved above ``1 + tolerance``, pass only with the whole interval
  above ``1 - tolerance`` at the look's boundary (``spend_pass``: pairs promise their pass at the tolerance
  itself, a stored baseline at twice it), else undecided;
* **the stopping rules** are the sequential verdict's (:mod:`.sequential`): the first decision after
  ``--dlperf-runs`` pairs, any decision (not only a regression) needing :data:`MIN_PAIRS` counted pairs, so that
  the spread is measured, not the prior's alone (one A/A pair read +33% beside a busy neighbour), at most
  ``--dlperf-max-runs`` pairs (:data:`MAX_PAIRS` where it is not given; never a time), a busy pair not counted and
  :data:`.sequential.BUSY_RUNS` busy pairs in a row ending it.

Everything here is a pure function; :func:`pytest_dlperf.ab.pairs.measure_pairs` measures the pairs.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from . import evidence as ev
from .evidence import CONFIDENCE, Decision, Estimate, StopReason
from .figures import RunFigure

CANDIDATE = "candidate"
REFERENCE = "reference"
SIDES = (CANDIDATE, REFERENCE)
#: A pair's log ratio is the difference of two runs' logs: its variance twice a run's, so the prior on a pair's
#: spread is sqrt(2) times the prior on a run's (:func:`.evidence.prior_sigma`).
PAIR_PRIOR_SCALE = math.sqrt(2.0)
#: Counted pairs before any decision: 4 give the pairs' spread 3 degrees of freedom of its own, as many as the
#: prior's (:data:`.evidence.PRIOR_DOF`), so that two pairs that happen to agree cannot pass a case (simulated:
#: benchmarks/ab_simulation.py; a reference 9% faster passed 0.4% of sessions at 2 pairs, 0.0% at 4).
MIN_PAIRS = 4
#: Most pairs of a case where --dlperf-max-runs is not given: pairs whose log ratios vary 5-6% (two fresh runs on a
#: 2-core VM) decide a 9% slower candidate (tolerance 5%) in 94-99% of sessions by 30, in 53-68% by 10
#: (simulated; measured: 7 of 11 at 10).
MAX_PAIRS = 30

def pair_order(seed: int, index: int) -> tuple[str, str]:
    """The sides of pair ``index`` in the order they run: drawn from ``seed`` and ``index`` alone (a string seed:
    the same draw on every host and Python), each order with probability 1/2."""
    first = random.Random(f"dlperf-ab:{seed}:{index}").random() < 0.5
    return (CANDIDATE, REFERENCE) if first else (REFERENCE, CANDIDATE)


def draw_seed() -> int:
    """A session's seed where none was given (``dlperf_against_seed``)."""
    return random.SystemRandom().randrange(1, 2 ** 31)


@dataclasses.dataclass(frozen=True)
class Pair:
    """One pair: the order its runs ran in, each side's run figure, and why it is no evidence (None: it is)."""

    index: int
    first: str  # CANDIDATE or REFERENCE
    candidate: RunFigure
    reference: RunFigure

    @property
    def busy(self) -> str | None:
        """Why the pair is not counted: the first of its runs that was busy, said with its side."""
        for side, figure in ((CANDIDATE, self.candidate), (REFERENCE, self.reference)):
            if figure.busy:
                return f"the {side}'s run: {figure.busy}"
        return None

    @property
    def ratio(self) -> float:
        return self.candidate.value / self.reference.value

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "first": self.first, "ratio": self.ratio, "busy": self.busy,
                "candidate": self.candidate.to_dict(), "reference": self.reference.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pair:
        return cls(data["index"], data["first"], RunFigure.from_dict(data["candidate"]),
                   RunFigure.from_dict(data["reference"]))


def estimate(ratios: Sequence[float], tolerance: float, confidence: float = CONFIDENCE) -> Estimate:
    """The geometric mean of the pairs' ``ratios`` (candidate / reference) with its interval, as an
    :class:`~.evidence.Estimate` against a reference of 1 (``difference``: the candidate's relative change)."""
    if not ratios:
        raise ValueError("no pair to estimate from")
    logs = [math.log(r) for r in ratios]
    sigma, dof = ev.pooled_sigma(logs, (), tolerance, prior_scale=PAIR_PRIOR_SCALE)
    se = sigma / math.sqrt(len(logs))
    center = statistics.fmean(logs)
    half = ev.t_quantile(0.5 + confidence / 2, dof) * se
    return Estimate(math.exp(center), math.exp(center - half), math.exp(center + half), len(logs), sigma, dof,
                    1.0, 0, confidence, se=se)


def judge(pairs: Sequence[Pair], tolerance: float, look: int = 1, max_looks: int = 1,
          min_pairs: int = 1) -> tuple[Estimate | None, Decision]:
    """The estimate from the counted pairs and what it decides; fewer than ``min_pairs`` counted pairs
    (:data:`MIN_PAIRS`) decide nothing: one pair can be an outlier, and its interval would be
    the prior's alone (a stored baseline's single run pools the baseline's measured spread; a pair has none)."""
    counted = [p for p in pairs if not p.busy]
    if not counted:
        return None, Decision.UNDECIDED
    ratios = [p.ratio for p in counted]
    est = estimate(ratios, tolerance)
    # The pass spent: a reference 10% faster passed at 4 pairs (CI -9.3..+15.2%) with an unspent one.
    decision = ev.decide(est, tolerance, look=look, looks=max_looks, spend_pass=True)
    if len(ratios) < min_pairs:
        decision = Decision.UNDECIDED
    return est, decision


@dataclasses.dataclass
class PairedEvidence:
    """What a case's pairs showed: the seed of their orders, every pair, the estimate, the decision and why
    measuring stopped."""

    seed: int
    tolerance: float
    pairs: list[Pair] = dataclasses.field(default_factory=list)
    estimate: Estimate | None = None
    decision: Decision = Decision.UNDECIDED
    stopped: StopReason = StopReason.DECIDED

    @property
    def counted(self) -> list[Pair]:
        return [p for p in self.pairs if not p.busy]

    def side_mean(self, side: str) -> float | None:
        """The geometric mean of a side's runs in the counted pairs (all pairs where none counted)."""
        pairs = self.counted or self.pairs
        values = [getattr(p, side).value for p in pairs]
        return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "tolerance": self.tolerance, "decision": self.decision.value,
                "stopped": StopReason(self.stopped).value,
                "estimate": None if self.estimate is None else self.estimate.to_dict(),
                "candidate": self.side_mean(CANDIDATE), "reference": self.side_mean(REFERENCE),
                "pairs": [p.to_dict() for p in self.pairs]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedEvidence:
        est = data.get("estimate")
        return cls(data["seed"], data["tolerance"], [Pair.from_dict(p) for p in data.get("pairs") or []],
                   Estimate.from_dict(est) if est else None, Decision(data["decision"]), StopReason(data["stopped"]))
