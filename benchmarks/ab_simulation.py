"""How A/B sessions' stopping rules decide, simulated with the plugin's own paired verdict (issue 38).

Each simulated session draws pair log ratios from a normal distribution (``--noise``: their standard deviation,
what two fresh runs' ratio varies by on a host; 4-7% on the 2-core CPU VMs measured here) around a true change,
and judges them after each pair with :func:`pytest_dlperf.gate.paired.judge`, the looks and the least pairs of
:func:`pytest_dlperf.ab.pairs.measure_pairs`, until a decision or ``--max-pairs``. Printed per noise, most pairs,
least pairs and true change: the share of sessions that failed, passed, improved, or ended undecided, and the mean
pairs they took. What it showed (5% tolerance): a candidate 9.1% slower (10% more work) failed in 63-68% of
sessions at 10 pairs of 5% noise, 98-99.6% at 30 (500 sessions); with two pairs needed, two that happened to agree
passed it in 0.2-0.8% of sessions at 5-6% noise, at most 0.1% with four (3,000 sessions).

    python benchmarks/ab_simulation.py                                   # the defaults below, about 1 minute
    python benchmarks/ab_simulation.py --noise 0.05 --max-pairs 10,30 --min-pairs 2,4 --trials 2000
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from collections import Counter

from pytest_dlperf.gate.evidence import Decision
from pytest_dlperf.gate.figures import RunFigure
from pytest_dlperf.gate.paired import MAX_PAIRS, MIN_PAIRS, Pair, judge


def session(change: float, noise: float, max_pairs: int, min_pairs: int, tolerance: float,
            rng: random.Random) -> tuple[Decision, int]:
    """One session: pairs drawn until the paired verdict decides or ``max_pairs`` (the decision, pairs taken)."""
    pairs: list[Pair] = []
    needed = min(min_pairs, max_pairs)
    while True:
        ratio = math.exp(math.log1p(change) + rng.gauss(0.0, noise))
        index = len(pairs)
        pairs.append(Pair(index, "candidate", RunFigure(index, ratio), RunFigure(index, 1.0)))
        _, decision = judge(pairs, tolerance, len(pairs), max_pairs, needed)
        if decision is not Decision.UNDECIDED or len(pairs) >= max_pairs:
            return decision, len(pairs)


def shares(change: float, noise: float, max_pairs: int, min_pairs: int, tolerance: float, trials: int,
           rng: random.Random) -> tuple[dict[Decision, float], float]:
    """Of ``trials`` sessions: the share of each decision, and the mean pairs a session took."""
    counts: Counter = Counter()
    taken = 0
    for _ in range(trials):
        decision, pairs = session(change, noise, max_pairs, min_pairs, tolerance, rng)
        counts[decision] += 1
        taken += pairs
    return {d: counts[d] / trials for d in Decision}, taken / trials


def numbers(text: str, kind=float) -> list:
    return [kind(item) for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noise", type=numbers, default=[0.04, 0.05, 0.06], help="pair log-ratio SDs, comma-separated")
    parser.add_argument("--max-pairs", type=lambda t: numbers(t, int), default=[10, MAX_PAIRS])
    parser.add_argument("--min-pairs", type=lambda t: numbers(t, int), default=[2, MIN_PAIRS])
    parser.add_argument("--changes", type=numbers, default=[-1 / 11, 0.0, -0.04],
                        help="true changes of the candidate (default: 10%% more work, none, 4%% slower)")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'noise':>5} {'max':>4} {'min':>4} {'change':>7}  {'fail':>6} {'pass':>6} {'improved':>8} "
          f"{'undecided':>9}  pairs")
    grid = itertools.product(args.noise, args.max_pairs, args.min_pairs, args.changes)
    for noise, max_pairs, min_pairs, change in grid:
        share, pairs = shares(change, noise, max_pairs, min_pairs, args.tolerance, args.trials, rng)
        print(f"{noise:5.2f} {max_pairs:4d} {min_pairs:4d} {change:+7.1%}  "
              f"{share[Decision.REGRESSION]:6.1%} {share[Decision.PASS]:6.1%} {share[Decision.IMPROVED]:8.1%} "
              f"{share[Decision.UNDECIDED]:9.1%}  {pairs:5.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
