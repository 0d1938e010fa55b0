"""NVIDIA's own ResNet-50 script beside the built-in resnet50: both figures and their ratio, one session.

The mission's "compare a machine against NGC's numbers", done on one machine: NVIDIA
DeepLearningExamples' ConvNets ``main.py`` (what the NGC ResNet-50 v1.5 figures come from) runs as
a command case (docs/trainers.md, "NVIDIA DeepLearningExamples: ConvNets main.py"), and the
built-in ``resnet50`` of the same precision and batch runs beside it, in the same pytest session,
by the same method (warm-up, windows, fresh runs). The script prints the summary table of the
two cases, then one line: ``ngc-rn50 / resnet50 = R``.

Bring the code yourself (nothing of it is part of pytest-dlperf): a copy of
``PyTorch/Classification/ConvNets`` from https://github.com/NVIDIA/DeepLearningExamples
(``--convnets``) and https://github.com/NVIDIA/dllogger (``--dllogger``, the folder holding the
``dllogger`` package; the PyPI name ``dllogger`` is someone else's placeholder). ``main.py`` also
imports ``pynvml`` (nvidia-ml-py, a dependency of pytest-dlperf).

``main.py`` defines its DALI pipeline classes at import time (``class HybridTrainPipe(Pipeline)`` in
``image_classification/dataloaders.py``), so it fails to import where DALI is not installed, as on a
GPU image without NVIDIA's container (2026-11-26: ``NameError: name 'Pipeline' is not defined``).
With ``--data-backend synthetic`` no pipeline ever runs: where ``nvidia.dali`` cannot be imported,
the command starts ``main.py`` through ``runpy`` with the one name its import needs, ``Pipeline``,
bound to ``object`` among the builtins (DALI's own import still fails, so the DALI backends stay
unavailable), and the script says so.

``main.py`` is CUDA-only (``.cuda()``, ``torch.cuda.synchronize()`` in every step): on a machine
without a GPU (``--device cpu``, the dry run) its case fails, the plugin says why (the script's
last lines: NVML or CUDA not found) and the built-in case still runs on the CPU.

    python benchmarks/ngc_side_by_side.py --convnets .peer/convnets --dllogger .peer/dllogger \\
        --precision amp --batch-size 256 --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: main.py started through runpy with ``Pipeline`` bound (see the module docstring): where DALI is missing.
WITHOUT_DALI = ("import builtins, runpy, sys; builtins.Pipeline = object; sys.argv = ['main.py', *sys.argv[1:]]; "
                "runpy.run_path('main.py', run_name='__main__')")

CONFTEST = '''
from pytest_dlperf import register_command

# NVIDIA DeepLearningExamples' ConvNets main.py on synthetic data: {{steps}} iterations, each but the last logged
# (DLLogger's train.total_ips: the global batch over the iteration's time), into {{run_dir}}/raport.json.
register_command(
    "ngc-rn50",
    ["{{python}}", *{main!r}, "--arch", "resnet50", "--data-backend", "synthetic", "-b", "{{batch_size}}",
     "--prof", "{{steps}}", "--print-freq", "1", "--epochs", "1", "--training-only", "--no-checkpoints",
     "--workspace", "{{run_dir}}", "--raport-file", "raport.json", "{{precision_args}}", "{{run_dir}}"],
    cwd={convnets!r},
    env={{"PYTHONPATH": {dllogger!r}}},
    precisions={{"amp": ["--amp", "--static-loss-scale", "128", "--memory-format", "nhwc"], "tf32": [], "fp32": []}},
    parser="dllogger", key="train.total_ips", log_file="{{run_dir}}/raport.json",
    unit="img/s", batch_size=256, timeout=600,
    unlogged_steps=1,  # main.py logs an iteration when the next one starts: --prof N logs N - 1
    description="NVIDIA DeepLearningExamples ConvNets main.py --arch resnet50 (synthetic data)",
)
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convnets", type=Path, required=True,
                        help="a copy of DeepLearningExamples' PyTorch/Classification/ConvNets")
    parser.add_argument("--dllogger", type=Path, required=True, help="the folder holding NVIDIA's dllogger package")
    parser.add_argument("--device", default="cuda", help="--dlperf-device (default cuda; cpu: the dry run)")
    parser.add_argument("--precision", default="amp", help="amp (default), tf32 or fp32")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--runs", type=int, default=2, help="--dlperf-runs of each case (default 2)")
    parser.add_argument("--steps", default="20,30,3", help="warm-up steps, steps per window, windows (20,30,3)")
    parser.add_argument("--json", type=Path, default=None, help="copy the session's results document here")
    parser.add_argument("--timeout", type=float, default=900)
    opts = parser.parse_args(argv)
    convnets, dllogger = opts.convnets.resolve(), opts.dllogger.resolve()
    for path, what in ((convnets / "main.py", "--convnets"), (dllogger / "dllogger" / "__init__.py", "--dllogger")):
        if not path.is_file():
            print(f"ngc_side_by_side: {what}: {path} not found", file=sys.stderr)
            return 2
    warmup, steps, repeats = opts.steps.split(",")
    with tempfile.TemporaryDirectory(prefix="dlperf-ngc-") as tmp:
        folder = Path(tmp)
        import importlib.util

        main = ["./main.py"]
        if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
            main = ["-c", WITHOUT_DALI]
            print("ngc_side_by_side: DALI is not installed: main.py starts with `Pipeline` bound to object, the one "
                  "DALI name its import needs (--data-backend synthetic runs no pipeline)", flush=True)
        (folder / "conftest.py").write_text(CONFTEST.format(convnets=str(convnets), dllogger=str(dllogger), main=main))
        results = folder / "results.json"
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", "-m", "dlperf",
                "--dlperf-device", opts.device, "--dlperf-model", "ngc-rn50,resnet50",
                "--dlperf-precision", opts.precision, "--dlperf-batch-size", str(opts.batch_size),
                "--dlperf-runs", str(opts.runs), "--dlperf-max-runs", str(opts.runs),
                "--dlperf-warmup-steps", warmup, "--dlperf-steps", steps, "-o", f"dlperf_repeats={repeats}",
                "--dlperf-json", str(results), "--dlperf-log-dir", str(folder / "logs")]
        print("+", " ".join(args), flush=True)
        proc = subprocess.run(args, cwd=folder, timeout=opts.timeout, check=False)
        if not results.exists():
            print(f"ngc_side_by_side: the session wrote no results (exit {proc.returncode})")
            return 1
        if opts.json:
            opts.json.write_bytes(results.read_bytes())
        cases = {c["case"]["model"]: c for c in json.loads(results.read_text())["cases"]}
    print()
    for model in ("ngc-rn50", "resnet50"):
        case = cases.get(model)
        if case is None:
            print(f"{model}: no case")
            continue
        runs = [round(r["throughput"], 1) for r in (case.get("evidence") or {}).get("runs") or []]
        print(f"{model}: {case.get('throughput') or 0:.1f} {case.get('unit')} ({case['verdict']}; runs {runs}): "
              f"{case['message'][:300]}")
    ngc, ours = (cases.get(m, {}).get("throughput") for m in ("ngc-rn50", "resnet50"))
    if ngc and ours:
        print(f"ngc-rn50 / resnet50 = {ngc / ours:.4f} ({opts.precision} bs{opts.batch_size}, {opts.device})")
    else:
        print("ngc-rn50 / resnet50: no ratio (a case has no figure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
