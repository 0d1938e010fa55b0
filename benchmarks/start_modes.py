"""A forked worker against a fresh one, side by side (issue 42): does how a run's worker starts move its figure?

On an H200, resnet50 amp bs64 (a step the host sets the pace of) measured 3,068.7 img/s in a worker forked by the
fork server and 2,758.5 in a fresh interpreter (1.11); the issue's goal is within 3%.  For each case, in one
process (so that one fork server serves every forked run, as in a session): one untimed run first, then
``--alternations`` rounds of one forked and one fresh run, the order swapped every round, each run the plugin's
own (:func:`pytest_dlperf.launch.workers.measure`: a fresh process, warm-up, windows).  It prints each run's
figure, its GPU utilization and the host's seconds to issue a step, the ratio of the forked runs' geometric mean
to the fresh runs', and what differs between a forked and a fresh worker's process
(:mod:`pytest_dlperf.worker.process_state`: threads, affinity, allocator and CUDA variables, gc, flags, ...).
Exit status 1 where a ratio is more than ``--max-difference`` from 1 (a finding, not a failure of the script).

    python benchmarks/start_modes.py --device cuda --cases resnet50:amp:64,bert-base:amp:64 --json starts.json
    python benchmarks/start_modes.py --device cpu --cases tiny:fp32:32 --steps 1,2,1 --alternations 1   # dry run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_dlperf.cases import Case
from pytest_dlperf.launch.workers import RunParams, measure
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.results.telemetry import gpu_utilizations
from pytest_dlperf.worker import process_state

STARTS = ("forked", "fresh")


def parse_case(text: str) -> Case:
    model, precision, batch = text.split(":")
    return Case.make(model, precision, int(batch), 1)


def one_run(case: Case, params: RunParams, start: str, workdir: Path, index: int) -> dict[str, Any]:
    record = measure(case, get_model_spec(case.model), dataclasses.replace(params, fork_server=start == "forked"),
                     workdir, first_index=index)[0]
    utils = gpu_utilizations([record.telemetry] if record.telemetry else [])
    state = Path(record.log_dir) / process_state.FILE.format(rank=0)
    return {"start": record.start, "asked": start, "throughput": record.median,
            "gpu_util": utils[0][1] if utils else None, "host_seconds_per_step": record.timing.get("host_seconds_per_step"),
            "step_seconds": statistics.median(w["seconds"] / w["steps"] for w in record.windows),
            "process": json.loads(state.read_text()) if state.exists() else None}


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def compare(case: Case, params: RunParams, alternations: int, workdir: Path, untimed: bool = True) -> dict[str, Any]:
    """One untimed run (``untimed``), then ``alternations`` rounds of both starts, the order swapped each round."""
    index = 0
    if untimed:
        one_run(case, params, "forked", workdir, index)  # the server's start, caches, autotuning's files
    runs: list[dict[str, Any]] = []
    for round_ in range(alternations):
        for start in (STARTS if round_ % 2 == 0 else STARTS[::-1]):
            index += 1
            run = one_run(case, params, start, workdir, index)
            runs.append(run)
            util = "-" if run["gpu_util"] is None else f"{run['gpu_util']:.0f}%"
            host = "-" if run["host_seconds_per_step"] is None else f"{1000 * run['host_seconds_per_step']:.1f} ms"
            print(f"  {case.id} round {round_} {run['start']:>6}: {run['throughput']:10.1f}  GPU util {util:>4}  "
                  f"host {host} of a {1000 * run['step_seconds']:.1f} ms step", flush=True)
    by_start = {s: [r["throughput"] for r in runs if r["start"] == s] for s in STARTS}
    ratio = geomean(by_start["forked"]) / geomean(by_start["fresh"]) if all(by_start.values()) else None
    states = {s: next((r["process"] for r in runs if r["start"] == s and r["process"]), None) for s in STARTS}
    differs = process_state.differences(states["forked"], states["fresh"]) if all(states.values()) else {}
    shown = {k: f"forked {pair[0]!r} / fresh {pair[1]!r}" for k, pair in differs.items()}
    if "environment" in differs:
        shown["environment"] = "; ".join(process_state.environment_differences(*differs["environment"]))
    return {"case": case.id, "runs": [{k: v for k, v in r.items() if k != "process"} for r in runs],
            "forked": by_start["forked"], "fresh": by_start["fresh"], "ratio": ratio, "process_differences": shown,
            "processes": states}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--cases", default="resnet50:amp:64,bert-base:amp:64", help="MODEL:PRECISION:BATCH,...")
    parser.add_argument("--alternations", type=int, default=3, help="rounds of one forked and one fresh run")
    parser.add_argument("--steps", default="20,30,3", help="warm-up steps, steps per window, windows")
    parser.add_argument("--max-difference", type=float, default=0.03, help="the most a ratio may be off 1")
    parser.add_argument("--no-untimed", action="store_true", help="no untimed run first (a dry run)")
    parser.add_argument("--json", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    warmup, steps, repeats = (int(v) for v in args.steps.split(","))
    params = RunParams(device=args.device, warmup_steps=warmup, steps=steps, repeats=repeats,
                       cpu_threads=1 if args.device == "cpu" else None)
    print(f"device {args.device}; warm-up {warmup}, {repeats} windows of {steps} steps per run; "
          f"{args.alternations} alternations of a forked and a fresh run per case, after one untimed run")
    results = []
    with tempfile.TemporaryDirectory(prefix="dlperf-starts-") as tmp:
        for text in args.cases.split(","):
            case = parse_case(text)
            results.append(compare(case, params, args.alternations, Path(tmp) / case.id, not args.no_untimed))
    worst = 0.0
    for result in results:
        ratio = result["ratio"]
        shown = "-" if ratio is None else f"{ratio:.4f}"
        print(f"{result['case']}: forked / fresh = {shown} (forked {', '.join(f'{v:.1f}' for v in result['forked'])}; "
              f"fresh {', '.join(f'{v:.1f}' for v in result['fresh'])})")
        for key, text in result["process_differences"].items():
            print(f"  differs: {key}: {text[:400]}")
        if ratio is not None:
            worst = max(worst, abs(ratio - 1))
    if args.json:
        args.json.write_text(json.dumps({"max_difference": args.max_difference, "cases": results}, indent=2))
    return 1 if worst > args.max_difference else 0


if __name__ == "__main__":
    sys.exit(main())
