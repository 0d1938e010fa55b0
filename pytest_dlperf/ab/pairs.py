"""An A/B case's pairs measured until they decide, or the budget ends: the stopping rules of
:mod:`pytest_dlperf.gate.paired` (the sequential verdict's, :mod:`pytest_dlperf.gate.sequential`, counted in pairs)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..gate.evidence import Decision, StopReason
from ..gate.paired import MIN_PAIRS, Pair, PairedEvidence, judge, pair_order
from ..gate.sequential import BUSY_RUNS, BUSY_WAIT, Budget


def measure_pairs(measure_pair: Callable[[int, tuple[str, str]], Pair], budget: Budget, tolerance: float, seed: int,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> PairedEvidence:
    """``measure_pair(index, order)`` (one fresh run of each side, in ``order``) until the pairs decide or the budget
    ends (the module's stopping rules); ``budget.first_runs`` and ``max_runs`` count pairs."""
    found = PairedEvidence(seed, tolerance)
    max_looks = max(1, budget.max_runs - budget.first_runs + 1)
    min_pairs = min(MIN_PAIRS, budget.max_runs)  # a user's --dlperf-max-runs 3 is decided at 3
    while True:
        index = len(found.pairs)
        pair_started = clock()
        found.pairs.append(measure_pair(index, pair_order(seed, index)))
        if len(found.pairs) < budget.first_runs:
            continue
        look = max(1, len(found.counted) - budget.first_runs + 1)  # a busy pair is no evidence: no look
        found.estimate, found.decision = judge(found.pairs, tolerance, look, max_looks, min_pairs)
        if found.decision is not Decision.UNDECIDED:
            found.stopped = StopReason.DECIDED
            return found
        if len(found.pairs) >= BUSY_RUNS and all(p.busy for p in found.pairs[-BUSY_RUNS:]):
            found.stopped = StopReason.BUSY
            return found
        if len(found.pairs) >= budget.max_runs:
            found.stopped = StopReason.MAX_RUNS
            return found
        if found.pairs[-1].busy:
            sleep(min(BUSY_WAIT, clock() - pair_started))
