"""Does a fixed probe follow the machine's own drift?  Measured, for the calibration a verdict would need.

On the project's shared 2-core machine, unchanged sessions of one case drifted 22-38% below
the session that saved their baseline, with under 2% steal time and under 2% CPU used by
other processes (README, "How a verdict is decided").  A verdict could tell "the machine is
slower" from "training got slower" only if a probe that does not use torch slows down with the
machine.  This script measures whether one does, before any verdict relies on it.

Each round, in turn: three probes (each timed best of 3, single-threaded, no torch), one
pytest session of the ``tiny`` case (``--dlperf-json``: its throughput), the probes again.
The probes:

- ``hash``: SHA-256 over 4 MiB (the CPU's integer pipeline; no memory traffic to speak of);
- ``matmul``: numpy float32 256 x 256 matrix products (BLAS arithmetic, not torch's);
- ``copy``: numpy copies of 64 MiB (memory bandwidth).

It prints each round's figures, then for each probe the Pearson correlation of log(probe
rate) with log(throughput) across rounds, and the coefficient of variation of the throughput
as measured and divided by each probe's rate (relative to the rounds' mean).  A probe that
follows the drift correlates strongly and makes the divided figures steadier than the raw ones.
Exit status 0: the figures are the result.

    python benchmarks/machine_drift.py --rounds 30

``--threads 2,1`` asks another question: is the spread between sessions the worker's threads
contending with the controller and the telemetry thread on a 2-core machine?  Each round then
runs one session per thread count (``OMP_NUM_THREADS``, interleaved, no probes), and it prints
per count the CV of the sessions' figures beside the median CV of the windows within one session.

    python benchmarks/machine_drift.py --rounds 10 --threads 2,1

``--burst K --idle S`` asks whether the machine is faster after a rest (boost clocks, CPU
credits, a cool GPU): each round idles S seconds, then runs K sessions back to back; it prints
the mean and CV of the sessions by position in the burst.  A baseline saved right after a rest
would then be faster than the sessions of a long job.

    python benchmarks/machine_drift.py --rounds 4 --burst 8 --idle 120
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

FAST = ["--dlperf-device", "cpu", "--dlperf-model", "tiny", "--dlperf-precision", "fp32",
        "--dlperf-batch-size", "32", "--dlperf-warmup-steps", "5", "--dlperf-steps", "30", "--dlperf-repeats", "3",
        "--dlperf-max-interference", "off", "-p", "no:cacheprovider", "-p", "no:benchmark", "-q"]


def _best(work, repeats: int = 3) -> float:
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def probes() -> dict[str, float]:
    """Each probe's rate (work units per second, higher is faster)."""
    data = bytes(4 << 20)
    a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
    big = np.ones(16 << 20, dtype=np.float32)  # 64 MiB
    out = np.empty_like(big)
    return {
        "hash": 1 / _best(lambda: hashlib.sha256(data).digest()),
        "matmul": 1 / _best(lambda: [a @ a for _ in range(20)]),
        "copy": 1 / _best(lambda: np.copyto(out, big)),
    }


def session_record(folder: Path, env: dict[str, str] | None = None) -> dict:
    """One fresh pytest session of the tiny case: its case record from the JSON results."""
    results = folder / "results.json"
    results.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest", *FAST, "--dlperf-json", str(results)], cwd=folder,
                          capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"machine_drift: the session failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(results.read_text())["cases"][0]


def session(folder: Path) -> float:
    """One fresh pytest session of the tiny case: its throughput (img/s)."""
    return float(session_record(folder)["throughput"])


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def by_threads(rounds: int, counts: list[int]) -> int:
    """Sessions interleaved across thread counts: the spread between sessions and within one, per count."""
    figures: dict[int, list[float]] = {n: [] for n in counts}
    window_cvs: dict[int, list[float]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(prefix="dlperf-drift-") as tmp:
        print(f"{'round':>5} {'time':>8} " + " ".join(f"{f'{n} thr img/s':>13}" for n in counts), flush=True)
        for index in range(rounds):
            row = []
            for n in counts:
                record = session_record(Path(tmp), {**os.environ, "OMP_NUM_THREADS": str(n)})
                windows = [w["throughput"] for w in record["attempts"][0]["runs"][0]["windows"]]
                figures[n].append(float(record["throughput"]))
                window_cvs[n].append(cv(windows))
                row.append(figures[n][-1])
            print(f"{index:>5} {time.strftime('%H:%M:%S'):>8} " + " ".join(f"{v:13.1f}" for v in row), flush=True)
    print(f"\n{rounds} rounds")
    print(f"{'threads':>7} {'mean img/s':>10} {'CV between sessions':>20} {'median CV within one':>21}")
    for n in counts:
        print(f"{n:>7} {statistics.fmean(figures[n]):10.1f} {100 * cv(figures[n]):19.1f}% "
              f"{100 * statistics.median(window_cvs[n]):20.1f}%")
    return 0


def bursts(rounds: int, burst: int, idle: float) -> int:
    """Rounds of a rest then ``burst`` sessions back to back: the figures by position in the burst."""
    by_position: list[list[float]] = [[] for _ in range(burst)]
    with tempfile.TemporaryDirectory(prefix="dlperf-drift-") as tmp:
        for index in range(rounds):
            time.sleep(idle)
            row = []
            for position in range(burst):
                row.append(session(Path(tmp)))
                by_position[position].append(row[-1])
            print(f"round {index} {time.strftime('%H:%M:%S')}: " + " ".join(f"{v:7.1f}" for v in row), flush=True)
    overall = statistics.fmean(v for column in by_position for v in column)
    print(f"\n{rounds} rounds of {idle:g} s idle then {burst} sessions; all {overall:.1f} img/s")
    print(f"{'position':>8} {'mean img/s':>10} {'vs all':>7} {'CV':>6}")
    for position, column in enumerate(by_position):
        spread = f"{100 * cv(column):5.1f}%" if len(column) > 1 else "    -"
        mean = statistics.fmean(column)
        print(f"{position + 1:>8} {mean:10.1f} {mean / overall:7.2f} {spread}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30,
                        help="rounds: of probes + one session; with --threads or --burst, of theirs (default 30)")
    parser.add_argument("--threads", default=None,
                        help="comma list of OMP_NUM_THREADS values: sessions per count, interleaved, no probes")
    parser.add_argument("--burst", type=int, default=None, help="sessions back to back after each rest (no probes)")
    parser.add_argument("--idle", type=float, default=120.0, help="seconds of rest before each burst (default 120)")
    args = parser.parse_args(argv)
    if args.threads:  # each session gets its own OMP_NUM_THREADS
        return by_threads(args.rounds, [int(n) for n in args.threads.split(",")])
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the probes single-threaded; the sessions' workers alike
    if args.burst:
        return bursts(args.rounds, args.burst, args.idle)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlperf-drift-") as tmp:
        folder = Path(tmp)
        print(f"{'round':>5} {'time':>8} {'img/s':>8} {'hash/s':>8} {'matmul/s':>9} {'copy/s':>8}", flush=True)
        for index in range(args.rounds):
            before = probes()
            throughput = session(folder)
            after = probes()
            rates = {k: math.sqrt(before[k] * after[k]) for k in before}
            rows.append((throughput, rates))
            print(f"{index:>5} {time.strftime('%H:%M:%S'):>8} {throughput:8.1f} {rates['hash']:8.1f} "
                  f"{rates['matmul']:9.1f} {rates['copy']:8.1f}", flush=True)
    throughput = [t for t, _ in rows]
    print(f"\n{len(rows)} rounds; throughput CV {100 * cv(throughput):.1f}% "
          f"(range {min(throughput):.0f}-{max(throughput):.0f} img/s)")
    print(f"{'probe':>8} {'probe CV':>9} {'r(log)':>7} {'p':>8} {'CV of img/s / probe':>20}")
    for name in rows[0][1]:
        rate = [r[name] for _, r in rows]
        r, p = stats.pearsonr([math.log(v) for v in rate], [math.log(v) for v in throughput])
        divided = [t / v for t, v in zip(throughput, rate)]
        print(f"{name:>8} {100 * cv(rate):8.1f}% {r:7.2f} {p:8.3f} {100 * cv(divided):19.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
