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

``--malloc steady,system`` runs sessions interleaved per ``dlperf_malloc`` mode (and, with
``--threads``, per thread count): is the spread the allocator's?

    python benchmarks/machine_drift.py --rounds 8 --threads 2,1 --malloc steady,system

``--faults`` asks why: it gives plain training processes of ``tiny`` (no pytest) each mode's
environment and counts their page faults per window.

    python benchmarks/machine_drift.py --rounds 8 --faults

``--copy`` asks whether runs follow the memory bandwidth and the core the host's other tenants
leave them: fresh training processes of ``tiny`` (no pytest, one thread, steady malloc) time the
worker's own probes (:class:`pytest_dlperf.worker.interference.MemoryProbe` and ``CoreProbe``)
before each of 5 windows and after the last, as a run does.  It prints each process's median
img/s, GB/s and GFLOP/s, then for each probe the Pearson correlation of the logs, the slope of
log(img/s) on log(probe) and the CV left once it is accounted for, and the CV of the processes
kept by each probe drop (``MAX_BANDWIDTH_DROP``, ``MAX_CORE_DROP`` alike) below the
fastest third's medians.

    python benchmarks/machine_drift.py --rounds 60 --copy

``--sync`` asks whether multi-threaded runs follow where the hypervisor placed the VM's two
vCPUs: a C ping-pong between threads pinned to CPUs 0 and 1 (it needs ``cc``) is timed before
each of 12 training windows of a small convnet, in fresh processes per thread count.

    python benchmarks/machine_drift.py --rounds 6 --sync --threads 2,1
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

# numpy's OpenBLAS reads this when numpy loads: the matmul probe single-threaded (two threads would time
# where the hypervisor placed the two vCPUs, see --sync).  Torch does not read it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy import stats

FAST = ["--dlperf-device", "cpu", "--dlperf-model", "tiny", "--dlperf-precision", "fp32",
        "--dlperf-batch-size", "32", "--dlperf-warmup-steps", "5", "--dlperf-steps", "30", "-o", "dlperf_repeats=3",
        "-o", "dlperf_max_interference=off", "-p", "no:cacheprovider", "-p",
        "no:benchmark", "-q"]


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
    rng = np.random.default_rng(0)
    far = rng.integers(0, big.size, size=1 << 20)  # 1 Mi random reads over 64 MiB: DRAM latency
    cache = big[: 2 << 20]  # 8 MiB: fits the L3 this VM shares with its host's other tenants
    near = rng.integers(0, cache.size, size=1 << 20)
    return {
        "hash": 1 / _best(lambda: hashlib.sha256(data).digest()),
        "matmul": 1 / _best(lambda: [a @ a for _ in range(20)]),
        "copy": 1 / _best(lambda: np.copyto(out, big)),
        "gather": 1 / _best(lambda: np.take(big, far)),
        "l3": 1 / _best(lambda: np.take(cache, near)),
    }


def session_record(folder: Path, env: dict[str, str] | None = None, extra: list[str] = ()) -> dict:
    """One fresh pytest session of the tiny case: its case record from the JSON results."""
    results = folder / "results.json"
    results.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest", *FAST, *extra, "--dlperf-json", str(results)], cwd=folder,
                          capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"machine_drift: the session failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(results.read_text())["cases"][0]


def session(folder: Path) -> float:
    """One fresh pytest session of the tiny case: its throughput (img/s)."""
    return float(session_record(folder)["throughput"])


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def compare(rounds: int, variants: list[tuple[str, dict[str, str], list[str]]]) -> int:
    """Sessions interleaved across variants (label, environment, pytest arguments): the spread between
    sessions and within one, per variant."""
    figures: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    window_cvs: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    width = max(13, *(len(label) + 6 for label, _, _ in variants))
    with tempfile.TemporaryDirectory(prefix="dlperf-drift-") as tmp:
        print(f"{'round':>5} {'time':>8} " + " ".join(f"{label + ' img/s':>{width}}" for label, _, _ in variants),
              flush=True)
        for index in range(rounds):
            row = []
            for label, env, extra in variants:
                record = session_record(Path(tmp), {**os.environ, **env}, extra)
                windows = [w["throughput"] for w in record["attempts"][0]["runs"][0]["windows"]]
                figures[label].append(float(record["throughput"]))
                window_cvs[label].append(cv(windows))
                row.append(figures[label][-1])
            print(f"{index:>5} {time.strftime('%H:%M:%S'):>8} " + " ".join(f"{v:{width}.1f}" for v in row), flush=True)
    print(f"\n{rounds} rounds")
    print(f"{'variant':>{width}} {'mean img/s':>10} {'range':>11} {'CV between sessions':>20} "
          f"{'median CV within one':>21}")
    for label, values in figures.items():
        print(f"{label:>{width}} {statistics.fmean(values):10.1f} {min(values):5.0f}-{max(values):<5.0f} "
              f"{100 * cv(values):19.1f}% {100 * statistics.median(window_cvs[label]):20.1f}%")
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


PING_PONG = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Atomic long flag;
static long n;
static void pin(int cpu) {
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static void *pong(void *arg) {
    pin(1);
    for (long i = 0; i < n; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return arg;
}
int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 100000;
    pthread_t t; struct timespec a, b;
    pthread_create(&t, 0, pong, 0); pin(0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &b); pthread_join(t, 0);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
"""

#: What both scripts below share: an SGD step of ``model`` on the fixed batch ``x, y``, and a warm-up.
TRAIN = """
def step():
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for _ in range(5):
    step()
"""

SYNC_WINDOWS = """
import subprocess, sys, time, torch
from torch import nn
torch.set_num_threads(int(sys.argv[2]))
torch.manual_seed(0)
blocks = [m for _ in range(20) for m in (nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())]
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 10))
x, y = torch.randn(16, 3, 12, 12), torch.randint(0, 10, (16,))
""" + TRAIN + """
for _ in range(int(sys.argv[3])):
    latency = float(subprocess.run([sys.argv[1], "100000"], capture_output=True, text=True, check=True).stdout)
    began = time.perf_counter()
    for _ in range(30):
        step()
    print(latency, 16 * 30 / (time.perf_counter() - began), flush=True)
"""

FAULT_WINDOWS = """
import resource, sys, time, torch
from torch import nn
from pytest_dlperf.models import get_model_spec
torch.set_num_threads(1)
spec = get_model_spec("tiny")
model = spec.factory(spec.settings())
x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
""" + TRAIN + """
for _ in range(3):
    faults, began = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    for _ in range(30):
        step()
    print(32 * 30 / (time.perf_counter() - began), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)
"""


COPY_WINDOWS = """
import time, torch
from torch import nn
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.worker.interference import CoreProbe, MemoryProbe
torch.set_num_threads(1)
spec = get_model_spec("tiny")
model = spec.factory(spec.settings())
x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
""" + TRAIN + """
probe, core = MemoryProbe(), CoreProbe()
for _ in range(5):
    gbs, gflops, began = probe(), core(), time.perf_counter()
    for _ in range(60):
        step()
    print(32 * 60 / (time.perf_counter() - began), gbs, gflops, flush=True)
print(0, probe(), core())
"""


def script_rows(script: str, args: list[str], env: dict[str, str]) -> list[tuple[float, ...]]:
    """Run ``script`` (one of the above) in a fresh Python; each line it printed, as numbers."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True, env=env)
    return [tuple(map(float, line.split())) for line in done.stdout.splitlines() if line.strip()]


def faults(rounds: int, modes: list[str]) -> int:
    """Page faults and img/s per window of ``tiny`` (fp32, bs32, one thread) in fresh processes, per malloc mode.

    The workers' environment of ``dlperf_malloc`` (:func:`pytest_dlperf.launch.launchers.malloc_env`)
    is given to plain training processes (no pytest, no telemetry), interleaved.
    """
    from pytest_dlperf.launch.launchers import malloc_env

    seen: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for index in range(rounds):
        for mode in modes:
            env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
            env.update(malloc_env(mode, env), OMP_NUM_THREADS="1")
            rows = script_rows(FAULT_WINDOWS, [], env)
            seen[mode] += rows
            print(f"{index:>3} {mode:>6}: " + " ".join(f"{rate:.0f} img/s {n:.0f} faults" for rate, n in rows),
                  flush=True)
    print(f"\n{rounds} processes per mode, 3 windows of 30 steps each")
    print(f"{'malloc':>6} {'img/s (range)':>20} {'CV of processes':>16} {'faults per window (range)':>26}")
    for mode, rows in seen.items():
        per_process = [statistics.median(r for r, _ in rows[i:i + 3]) for i in range(0, len(rows), 3)]
        rates, counts = [r for r, _ in rows], [n for _, n in rows]
        spread = f"{100 * cv(per_process):15.1f}%" if len(per_process) > 1 else f"{'-':>16}"
        print(f"{mode:>6} {min(rates):9.0f}-{max(rates):<10.0f} {spread} "
              f"{min(counts):12.0f}-{max(counts):<13.0f}")
    return 0


def copy(rounds: int) -> int:
    """Fresh training processes with the worker's host probes beside their windows: does img/s follow the
    memory probe's GB/s, or the core probe's GFLOP/s?"""
    from pytest_dlperf.launch.launchers import malloc_env

    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    env.update(malloc_env("steady", env), OMP_NUM_THREADS="1")
    rates: list[float] = []
    probes: dict[str, list[float]] = {"GB/s": [], "GFLOP/s": []}
    print(f"{'round':>5} {'time':>8} {'img/s':>8} {'GB/s':>6} {'GFLOP/s':>8} {'CV of windows':>14}", flush=True)
    for index in range(rounds):
        rows = script_rows(COPY_WINDOWS, [], env)
        windows = [r for r, _, _ in rows if r > 0]
        rates.append(statistics.median(windows))
        probes["GB/s"].append(statistics.median(g for _, g, _ in rows))
        probes["GFLOP/s"].append(statistics.median(f for _, _, f in rows))
        print(f"{index:>5} {time.strftime('%H:%M:%S'):>8} {rates[-1]:8.0f} {probes['GB/s'][-1]:6.2f} "
              f"{probes['GFLOP/s'][-1]:8.1f} {100 * cv(windows):13.1f}%", flush=True)
    logs = [math.log(v) for v in rates]
    print(f"\n{rounds} processes: img/s CV {100 * cv(rates):.1f}% ({min(rates):.0f}-{max(rates):.0f})")
    references = {}
    for unit, values in probes.items():
        plogs = [math.log(v) for v in values]
        r, p = stats.pearsonr(plogs, logs)
        fit = stats.linregress(plogs, logs)
        residual = statistics.stdev(a - (fit.intercept + fit.slope * b) for a, b in zip(logs, plogs))
        references[unit] = statistics.median(sorted(values)[-max(1, rounds // 3):])
        print(f"{unit:>8}: CV {100 * cv(values):.1f}% ({min(values):.1f}-{max(values):.1f}); r(log probe, log img/s) "
              f"= {r:.2f} (p {p:.2g}); slope {fit.slope:.2f}; CV left once it is accounted for {100 * residual:.1f}%")
    print(f"{'max drop':>8} {'kept by GB/s':>13} {'CV':>6} {'kept by both':>13} {'CV':>6} "
          f"{'lowest kept / median kept':>26}  (references: the fastest third's medians, "
          + ", ".join(f"{v:.2f} {k}" for k, v in references.items()) + ")")
    for drop in (0.05, 0.10, 0.15, 0.20, 0.30):
        by_memory = [t for t, b in zip(rates, probes["GB/s"]) if b >= references["GB/s"] * (1 - drop)]
        by_both = [t for t, b, f in zip(rates, probes["GB/s"], probes["GFLOP/s"])
                   if b >= references["GB/s"] * (1 - drop) and f >= references["GFLOP/s"] * (1 - drop)]
        if len(by_both) >= 2:
            print(f"{100 * drop:7.0f}% {len(by_memory):13} {100 * cv(by_memory):5.1f}% {len(by_both):13} "
                  f"{100 * cv(by_both):5.1f}% {min(by_both) / statistics.median(by_both):26.3f}")
    return 0


def sync(rounds: int, threads: list[int]) -> int:
    """Core-to-core latency beside training windows: does the throughput follow where the vCPUs sit?

    A C ping-pong between two threads pinned to CPUs 0 and 1 (the round trip of a cache line)
    is timed before each window of a small convnet (the ``vq`` model of verdict_quality.py:
    20 conv blocks of 8 channels on 12 x 12 images, batch 16), in fresh processes, each with
    each thread count.  On a VM the hypervisor may move the vCPUs between host cores that share
    a cache and cores that do not; a workload whose threads meet at every operator pays for it.
    """
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("machine_drift --sync: needs a C compiler (cc or gcc) for the ping-pong")
    with tempfile.TemporaryDirectory(prefix="dlperf-sync-") as tmp:
        source, binary = Path(tmp) / "pingpong.c", Path(tmp) / "pingpong"
        source.write_text(PING_PONG)
        subprocess.run([compiler, "-O2", "-pthread", str(source), "-o", str(binary)], check=True)
        pairs: dict[int, list[tuple[float, float]]] = {n: [] for n in threads}
        for index in range(rounds):
            for n in threads:
                rows = script_rows(SYNC_WINDOWS, [str(binary), str(n), "12"], {**os.environ, "OMP_NUM_THREADS": str(n)})
                pairs[n] += rows
                print(f"{index:>3} {n} thr: " + " ".join(f"{lat:.0f}ns/{rate:.0f}" for lat, rate in rows), flush=True)
    print(f"\n{rounds} processes per thread count, 12 windows each: round trip (ns) / img/s")
    print(f"{'threads':>7} {'windows':>7} {'r(latency, img/s)':>18} {'img/s, trip < 200 ns':>21} "
          f"{'img/s, trip >= 200 ns':>22}")
    for n, rows in pairs.items():
        r, _ = stats.pearsonr([lat for lat, _ in rows], [rate for _, rate in rows])
        near = [rate for lat, rate in rows if lat < 200]
        far = [rate for lat, rate in rows if lat >= 200]
        def text(values):
            return f"{statistics.median(values):.0f} ({len(values)})" if values else "-"
        print(f"{n:>7} {len(rows):>7} {r:18.2f} {text(near):>21} {text(far):>22}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30,
                        help="rounds: of probes + one session; with --threads or --burst, of theirs (default 30)")
    parser.add_argument("--threads", default=None,
                        help="comma list of OMP_NUM_THREADS values: sessions per count, interleaved, no probes")
    parser.add_argument("--malloc", default=None,
                        help="comma list of dlperf_malloc modes (steady, system): sessions per mode, interleaved "
                             "(with --threads, per mode and thread count)")
    parser.add_argument("--burst", type=int, default=None, help="sessions back to back after each rest (no probes)")
    parser.add_argument("--idle", type=float, default=120.0, help="seconds of rest before each burst (default 120)")
    parser.add_argument("--faults", action="store_true",
                        help="page faults and img/s of plain training processes per --malloc mode "
                             "(default steady,system)")
    parser.add_argument("--sync", action="store_true",
                        help="core-to-core latency beside training windows, per --threads count (default 2,1)")
    parser.add_argument("--copy", action="store_true",
                        help="img/s of plain training processes beside the worker's memory probe (GB/s)")
    args = parser.parse_args(argv)
    if args.copy:
        return copy(args.rounds)
    if args.faults:
        return faults(args.rounds, (args.malloc or "steady,system").split(","))
    if args.sync:
        return sync(args.rounds, [int(n) for n in (args.threads or "2,1").split(",")])
    if args.threads or args.malloc:  # each session gets its own OMP_NUM_THREADS and/or allocator
        threads = [(f"{n} thr", {"OMP_NUM_THREADS": n}) for n in args.threads.split(",")] if args.threads \
            else [("", {})]
        mallocs = [(m, ["-o", f"dlperf_malloc={m}"]) for m in args.malloc.split(",")] if args.malloc else [("", [])]
        return compare(args.rounds, [(" ".join(filter(None, [t, m])), env, extra)
                                     for t, env in threads for m, extra in mallocs])
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the probes single-threaded; the sessions' workers alike
    if args.burst:
        return bursts(args.rounds, args.burst, args.idle)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlperf-drift-") as tmp:
        folder = Path(tmp)
        names = list(probes())
        print(f"{'round':>5} {'time':>8} {'img/s':>8} " + " ".join(f"{n + '/s':>9}" for n in names), flush=True)
        for index in range(args.rounds):
            before = probes()
            throughput = session(folder)
            after = probes()
            rates = {k: math.sqrt(before[k] * after[k]) for k in before}
            rows.append((throughput, rates))
            print(f"{index:>5} {time.strftime('%H:%M:%S'):>8} {throughput:8.1f} "
                  + " ".join(f"{rates[n]:9.1f}" for n in names), flush=True)
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
