"""How good are A/B verdicts (``--dlperf-against``, docs/ab.md)?  False alarms and detections, measured on the path a
user takes: real pytest sessions, the candidate this interpreter, the reference another side.

The model is ``verdict_quality.py``'s ``vq`` (a small convnet whose forward repeats its conv block
``DLPERF_VQ_COST`` times) in a temporary folder's ``conftest.py``; each session is
``pytest --dlperf-model vq --dlperf-device cpu --dlperf-against REF`` with the plugin's defaults but the step
counts (``--steps WARMUP,STEPS,REPEATS``; default: the plugin's own).  The kinds, alternating so that a drift of
the machine favours none:

* ``A/A``: the same interpreter as both sides (``--dlperf-against`` this Python): no FAIL expected;
* ``faster-ref``: the reference 10% faster: the candidate's runs do ``--cost`` x 1.1 blocks (``DLPERF_VQ_COST`` in
  this environment; ``--more-work``), the reference's ``--cost`` (``env DLPERF_VQ_COST=N python``, an interpreter
  with its own variable and fork server): caught (FAIL) in most, never PASS; with ``--model`` the candidate trains
  ``--more-work`` x the batch more samples a step (``DLPERF_VQ_PAD``);
* ``A/A+neighbour`` (``--neighbour-sessions``): A/A beside ``verdict_quality.py``'s neighbour, a process copying
  memory ``--neighbour-duty`` of the time, with ``-o dlperf_max_interference=off`` (a tenant no process list shows);
* ``A/A+tenant``: the same beside it, judged by the plugin's own rules (a busy pair not counted).

It prints per kind: sessions, FAIL / INCONCLUSIVE / PASS / IMPROVED, the mean pairs per verdict, the median ratio
and the mean seconds per session.  Exit status 0: the figures are the result.

    python benchmarks/ab_quality.py --sessions 20                  # the acceptance of issue 38
    python benchmarks/ab_quality.py --sessions 1 --neighbour-sessions 0 --steps 2,5,2 --max-pairs 2   # a smoke
    # on a lent GPU: A/A of resnet50 amp bs256 (no FAIL) and a 5% injected slowdown (caught)
    python benchmarks/ab_quality.py --model resnet50 --device cuda --precision amp --batch-size 256 \
        --more-work 0.05 --sessions 3 --neighbour-sessions 0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def verdict_quality():
    """``verdict_quality.py`` as a module: its ``vq`` conftest and its neighbour."""
    spec = importlib.util.spec_from_file_location("verdict_quality", HERE / "verdict_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def work(opts: argparse.Namespace) -> tuple[str, str, str]:
    """(the variable, the reference's value, the candidate's): the candidate does ``--more-work`` more: ``vq``'s
    blocks, or a ``--model``'s samples a step (``verdict_quality.py``'s padding: DLPERF_VQ_PAD)."""
    if opts.model == "vq":
        return "DLPERF_VQ_COST", str(opts.cost), str(round(opts.cost * (1 + opts.more_work)))
    from pytest_dlperf.models.registry import get_model_spec

    batch = opts.batch_size or get_model_spec(opts.model).batch_size
    return "DLPERF_VQ_PAD", "0", str(round(batch * opts.more_work))


def kinds(opts: argparse.Namespace, neighbour: str) -> list[tuple[str, dict[str, str], str, list[str], list[str]]]:
    """Each kind of session: (name, the candidate's environment, --dlperf-against, processes beside, more args)."""
    variable, reference, candidate = work(opts)
    same = {variable: reference}
    slower = {variable: candidate}
    faster_reference = f"env {variable}={reference} {sys.executable}"
    beside = [neighbour.format(duty=opts.neighbour_duty)]
    out = [("A/A", same, sys.executable, [], []), ("faster-ref", slower, faster_reference, [], [])]
    if opts.neighbour_sessions:
        out += [("A/A+neighbour", same, sys.executable, beside, ["-o", "dlperf_max_interference=off"]),
                ("A/A+tenant", same, sys.executable, beside, [])]
    return out


def session(vq, folder: Path, cost: dict[str, str], against: str, beside: list[str], extra: list[str],
            steps: list[str], timeout: float, kept: Path | None = None) -> dict:
    """One A/B session (run by ``verdict_quality.session``): its verdict, pairs, ratio and seconds; its results
    document copied to ``kept``."""
    kept = kept or folder / "kept.json"
    row = vq.session(folder, ["--dlperf-against", against, *steps, *extra], cost, beside, timeout, keep=kept)
    found = json.loads(kept.read_text())["cases"][0].get("paired") or {}
    return {"verdict": row["verdict"], "pairs": len(found.get("pairs") or []),
            "busy": sum(1 for p in found.get("pairs") or [] if p["busy"]),
            "ratio": (found.get("estimate") or {}).get("value"), "seconds": row["seconds"],
            "ratios": [round(p["ratio"], 3) for p in found.get("pairs") or [] if not p["busy"]],
            "message": row["message"] if row["verdict"] == "error" else row["message"].splitlines()[0]}


def print_table(table: dict[str, list[dict]]) -> None:
    print(f"{'kind':<14} {'sessions':>8} {'FAIL':>5} {'INCONCL':>7} {'PASS':>5} {'IMPROVED':>8} {'pairs/verdict':>13} "
          f"{'busy pairs':>10} {'ratio (median)':>14} {'s/session':>9}")
    for kind, rows in table.items():
        count = defaultdict(int)
        for row in rows:
            count[row["verdict"]] += 1
        ratios = [r["ratio"] for r in rows if r["ratio"]]
        mean = (lambda key: statistics.fmean(r[key] for r in rows)) if rows else (lambda key: float("nan"))
        print(f"{kind:<14} {len(rows):>8} {count['fail']:>5} {count['inconclusive']:>7} {count['pass']:>5} "
              f"{count['improved']:>8} {mean('pairs'):>13.1f} {sum(r['busy'] for r in rows):>10} "
              f"{statistics.median(ratios) if ratios else float('nan'):>14.3f} {mean('seconds'):>9.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions of each kind (default 20)")
    parser.add_argument("--neighbour-sessions", type=int, default=None,
                        help="sessions beside the neighbour, of each of its two kinds (default: --sessions)")
    parser.add_argument("--neighbour-duty", type=float, default=0.5, help="the neighbour's share of the time copying")
    parser.add_argument("--cost", type=int, default=20, help="vq's blocks on the reference side (default 20)")
    parser.add_argument("--more-work", type=float, default=0.10,
                        help="the candidate's extra work in the faster-ref kind, a fraction (default 0.10)")
    parser.add_argument("--model", default="vq", help="vq, or a registered image-classification model, padded by "
                                                      "verdict_quality.py's DLPERF_VQ_PAD (resnet50 on a GPU)")
    parser.add_argument("--device", default="cpu", help="--dlperf-device (default cpu)")
    parser.add_argument("--precision", default=None, help="--dlperf-precision (default: the plugin's)")
    parser.add_argument("--batch-size", type=int, default=None, help="--dlperf-batch-size (default: the model's)")
    parser.add_argument("--steps", default=None, help="WARMUP,STEPS,REPEATS (default: the plugin's)")
    parser.add_argument("--max-pairs", default=None, help="--dlperf-max-runs (default: the plugin's)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a session may take")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds in all: no session starts after them, and the table shows the sessions done")
    parser.add_argument("--keep", type=Path, default=None, help="a folder to keep each session's results document in "
                                                                  "(KIND-N.json)")
    parser.add_argument("--show", action="store_true", help="print each session's headline and its pairs' ratios")
    parser.add_argument("--pytest-args", default="", help="more arguments for every session, e.g. "
                                                         "'-o dlperf_max_interference=off' on a shared machine")
    opts = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill ends the running session too
    try:
        return measure(opts)
    finally:
        signal.signal(signal.SIGTERM, previous)


def measure(opts: argparse.Namespace) -> int:
    """The sessions ``opts`` ask for, and their table."""
    if opts.neighbour_sessions is None:
        opts.neighbour_sessions = opts.sessions
    vq = verdict_quality()
    steps = []
    if opts.steps:
        warmup, window, repeats = opts.steps.split(",")
        steps = ["--dlperf-warmup-steps", warmup, "--dlperf-steps", window, "-o", f"dlperf_repeats={repeats}"]
    steps += ["--dlperf-max-runs", opts.max_pairs] if opts.max_pairs else []
    steps += opts.pytest_args.split()
    if opts.model != "vq":
        os.environ["DLPERF_VQ_MODEL"] = opts.model  # the conftest registers vq-MODEL, in the workers too
    steps += ["--dlperf-model", "vq" if opts.model == "vq" else f"vq-{opts.model}", "--dlperf-device", opts.device]
    steps += (["--dlperf-precision", opts.precision] if opts.precision else []) + \
        (["--dlperf-batch-size", str(opts.batch_size)] if opts.batch_size else [])
    table: dict[str, list[dict]] = {name: [] for name, *_ in kinds(opts, vq.NEIGHBOUR)}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlperf-ab-quality-") as tmp:
        folder = Path(tmp)
        (folder / "conftest.py").write_text(vq.CONFTEST)
        try:
            for index in range(max(opts.sessions, opts.neighbour_sessions)):
                for name, cost, against, beside, extra in kinds(opts, vq.NEIGHBOUR):
                    wanted = opts.neighbour_sessions if beside else opts.sessions
                    if opts.budget is not None and time.monotonic() - started > opts.budget:
                        break
                    if index < wanted:
                        kept = opts.keep / f"{name.replace('/', '').replace('+', '-')}-{index + 1}.json" \
                            if opts.keep else None
                        row = session(vq, folder, cost, against, beside, extra, steps, opts.timeout, kept)
                        table[name].append(row)
                        if opts.show:
                            print(f"  {name}: {row['message']}\n    pairs: {row['ratios']}", flush=True)
        except KeyboardInterrupt:  # Ctrl-C or a kill: the sessions done so far
            print("interrupted: the sessions done so far", flush=True)
    print_table(table)
    variable, reference, candidate = work(opts)
    print(f"{time.monotonic() - started:.0f} s in all; candidate and reference: {sys.executable} "
          f"(faster-ref: the reference with {variable}={reference}, the candidate {candidate})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
