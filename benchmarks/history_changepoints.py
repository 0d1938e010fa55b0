"""How well ``dlperf history`` finds change points, measured on synthetic nightly series side by side.

For each scenario and noise level it draws ``--seeds`` series of 40 nightly figures and prints
how often the change point search (``pytest_dlperf.history.changepoints.find``) reports a change,
where, and how large, and how often ``--dlperf-history-gate``'s test (``newest_step``) fires:

* ``none``: a flat series: every change reported is a false alarm;
* ``step``: a 6% step down at session 25 (the acceptance test's series);
* ``drift``: a 3% slow drift down over sessions 20-39;
* ``gate``: 30 flat sessions and a newest figure 4% down (within a 5% tolerance): the gate's catch.

    python benchmarks/history_changepoints.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_dlperf.history import changepoints


def series(kind: str, noise: float, rng: np.random.Generator) -> np.ndarray:
    if kind == "gate":
        values = 1000 * (1 + noise * rng.standard_normal(31))
        values[-1] = 1000 * 0.96 * (1 + noise * rng.standard_normal())
        return values
    level = np.ones(40)
    if kind == "step":
        level[25:] *= 0.94
    elif kind == "drift":
        level[20:] = 1 - 0.03 * np.arange(1, 21) / 20
    return 1000 * level * (1 + noise * rng.standard_normal(40))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{'scenario':8s} {'noise':>5s} {'reported':>9s} {'gate':>6s}  where (median, IQR)   size (median)")
    for kind in ("none", "step", "drift", "gate"):
        for noise in (0.005, 0.01, 0.02):
            rng = np.random.default_rng(12345)
            reported, gated, where, size = 0, 0, [], []
            for _ in range(args.seeds):
                values = series(kind, noise, rng)
                steps = changepoints.find(values)
                gated += changepoints.newest_step(values, steps=steps) is not None
                if steps:
                    reported += 1
                    largest = max(steps, key=lambda s: abs(s.change))
                    where.append(largest.index)
                    size.append(100 * largest.change)
            spot = (f"{statistics.median(where):5.1f} ({np.percentile(where, 25):.0f}-{np.percentile(where, 75):.0f})"
                    if where else "    -")
            mean = f"{statistics.median(size):+.1f}%" if size else "-"
            print(f"{kind:8s} {100 * noise:4.1f}% {reported:4d}/{args.seeds:<4d} {gated:3d}/{args.seeds:<3d} "
                  f"{spot:20s} {mean}")
    print(f"({time.perf_counter() - started:.0f} s; alpha {changepoints.ALPHA}, {changepoints.PERMUTATIONS} "
          f"permutations, at least {changepoints.MIN_SIZE} sessions a side)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
