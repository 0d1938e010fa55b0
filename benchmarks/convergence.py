"""Time to accuracy on a CPU: does ``tiny`` reach 90% top-1 on the learnable set, and does a broken recipe fail?

The acceptance check of convergence cases (README: "Convergence cases"), side by side in one
invocation:

1. ``dlperf dataset --learnable`` writes the learnable set (``--classes`` classes, PNGs in
   ``train/`` and ``val/``) into a temporary folder;
2. one pytest session runs four convergence cases of ``tiny`` to ``top1 >= --target``,
   each with ``--seeds`` runs (seeds 0, 1, ...): fp32 on 1 rank, bf16 on 1 rank, fp32 on 2
   gloo ranks (half the per-rank batch: the same global batch), and fp32 with a learning
   rate 1000x the recipe's (the broken recipe);
3. it prints one line per case: verdict, runs that reached the target, median time,
   epochs and samples to target, the final metric, the whole run's img/s and the wall
   time of the case; then PASS when the three good cases reached the target within
   ``--max-seconds`` each and the broken one failed as "target not reached".

Exit status: 0 pass, 1 fail.  ``--keep DIR`` keeps the results, the report and the
learning-curve PNG there.

    python benchmarks/convergence.py            # about 1-2 minutes on an idle 2-core machine
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"data": "torchvision"}


def cases(args: argparse.Namespace) -> list[dict]:
    def case(precision: str, batch: int, gpus: int, lr: float) -> dict:
        return {"model": "tiny", "precision": precision, "batch_size": batch, "gpus": gpus,
                "settings": {**SETTINGS, "num_classes": args.classes},
                "target": {"metric": "top1", "value": args.target},
                "budget": {"epochs": args.epochs, "seconds": args.max_seconds},
                "recipe": {"lr": lr, "eval_every": args.eval_every}, "seeds": args.seeds}
    return [case("fp32", args.batch, 1, args.lr), case("bf16", args.batch, 1, args.lr),
            case("fp32", args.batch // 2, 2, args.lr), case("fp32", args.batch, 1, args.lr * 1000)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="per rank on 1 rank; halved on 2 ranks")
    parser.add_argument("--lr", type=float, default=0.4, help="peak learning rate per 256 samples")
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="the budget and the pass mark")
    parser.add_argument("--keep", metavar="DIR")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="dlperf-convergence-") as tmp:
        out = Path(args.keep) if args.keep else Path(tmp) / "out"
        out.mkdir(parents=True, exist_ok=True)
        data = Path(tmp) / "learnable"
        subprocess.run([sys.executable, "-m", "pytest_dlperf", "dataset", "--learnable", "--classes",
                        str(args.classes), "--out", str(data)], check=True, env=env)
        baseline = Path(tmp) / "baseline.json"
        baseline.write_text(json.dumps({"schema_version": 2, "kind": "dlperf-baseline",
                                        "provenance": {"source": "benchmarks/convergence.py"},
                                        "cases": cases(args)}))
        session = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                                  "--rootdir", tmp, "--dlperf-baseline", str(baseline), "--dlperf-device", "cpu",
                                  "--dlperf-convergence-data", str(data), "--dlperf-json", str(out / "results.json"),
                                  "--dlperf-report", str(out / "report.md")],
                                 cwd=tmp, env=env, capture_output=True, text=True, check=False)
        if not (out / "results.json").exists():
            print(session.stdout[-4000:], session.stderr[-4000:])
            return 1
        results = json.loads((out / "results.json").read_text())["cases"]
    print(f"{'case':<66} {'verdict':<12} {'reached':>7} {'to target':>9} {'epochs':>6} {'samples':>7} "
          f"{'final':>5} {'img/s':>6} {'wall':>6}")
    good, broken = [], None
    for result in results:
        figures = result.get("convergence") or {}
        seconds = figures.get("seconds_to_target")
        row = (f"{result['id']:<66} {result['verdict']:<12} {figures.get('reached', 0)}/{figures.get('runs', 0):<5}"
               f" {'-' if seconds is None else f'{seconds:.1f} s':>9} {figures.get('epochs_to_target') or 0:>6.2f} "
               f"{figures.get('samples_to_target') or 0:>7.0f} {figures.get('final') or 0:>5.2f} "
               f"{figures.get('throughput') or 0:>6.1f} {result.get('duration', 0):>5.1f}s")
        print(row)
        if "lr=" in result["id"] and f"lr={args.lr * 1000:g}" in result["id"]:
            broken = result
        else:
            good.append((result, seconds))
    ok = all(s is not None and s <= args.max_seconds for _, s in good) and len(good) == 3
    ok = ok and broken is not None and "target not reached" in broken["message"]
    if broken is not None:
        print(f"broken recipe: {broken['message'].splitlines()[0]}")
    print("PASS" if ok else "FAIL", f"(good cases within {args.max_seconds:g} s to top1 {args.target:g}; "
          "the broken recipe fails as target not reached)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
