"""How good are the verdicts?  False alarms, detections, inconclusive cases and their cost, measured.

The gate is the product: a nightly job must fail when training got slower and must not fail
when it did not.  This script measures both, side by side, in one invocation, with real
pytest sessions of a small convnet whose cost it can raise by a known factor:

1. a temporary folder gets a ``conftest.py`` that registers ``vq``: a small convnet whose
   forward repeats its conv block ``DLPERF_VQ_COST`` times (default 20; 25 is 25% more work,
   a 20% lower throughput);
2. one session saves a baseline (``--dlperf-save-baseline``, ``--dlperf-runs`` 3 and
   ``--dlperf-max-runs`` twice that, so its busy runs are re-measured: the entry keeps its
   counted runs' medians);
3. for each ``--tolerances`` value the baseline's tolerance is set to it (``saved``: the one
   ``--dlperf-save-baseline`` gave it from the spread of its runs), and ``--sessions``
   sessions run the unchanged case, ``--sessions`` the slowed one (``--slowdown``, 20%
   by default) and, with ``--hog``, ``--sessions`` unchanged ones while another process keeps
   every CPU busy; with ``--neighbour-sessions``, that many unchanged ones beside a process that
   copies memory ``--neighbour-duty`` of the time, with ``-o dlperf_max_interference=off``: a
   tenant of the host that only the memory probe can see; with ``--tenant-sessions``, that many unchanged
   (``tenant``) and as many slowed ones (``tenant+slowed``, the first ``--slowdown``) beside the same
   process, judged by the plugin's own rules (the probes excuse nothing since issue 43); with
   ``--fine-sessions``, that many
   unchanged ones are judged at ``--fine-tolerance`` (20%): a case clearly fine, far from its threshold, whose verdict
   should cost one run.  The kinds alternate, so a drift of the machine does not favour one;
4. with ``--baseline-sessions N`` (N > 1), N - 1 more sessions measure the case right after the
   first, and ``dlperf baseline update --from`` each of the N results makes a second baseline
   of them all; the kinds ``unchanged@N`` and ``slowed@N`` are judged against it, beside the
   same kinds against the first session's baseline.
5. with ``--gpu-busy-sessions N`` (on CUDA), N unchanged sessions run while another process keeps
   the same GPU busy with matrix products: NVML lists it beside the case, which must end
   inconclusive (busy), never as a regression;
6. with ``--stale-sessions N``, a second baseline is saved over a copy of the first beside a process
   that copies memory ``--stale-duty`` of the time, the CPU rule off (a baseline saved in a slow
   minute of the host, which only the probes can see); the line ``stale baseline`` says its figure
   against the first, its busy runs and what the save said (``--dlperf-save-baseline`` compares its
   probes with the entry it replaces), and the kinds ``unchanged~stale`` and ``slowed~stale`` are
   judged against it.

With ``--user-path`` the baseline is saved as a user saves one, with the plugin's defaults (no
``--dlperf-runs``: 10 counted runs), and every session is judged at the tolerance the save wrote, with
the plugin's default ``--dlperf-max-runs``: the path the acceptance of issue 26 is measured on
(``--slowdown 0.3,0.15 --hog``).

It prints, per tolerance and kind: sessions, failed (for "unchanged", "hog" and the other kinds beside
something: false alarms; for "slowed": detections), inconclusive, passed, the mean runs per verdict, the
verdicts decided by their first run, the busy runs (measured beside a cause the message names: not
counted), and the mean seconds per session.  Exit status 0 (a table; no pass/fail threshold: the figures
are the result).

    python benchmarks/verdict_quality.py --user-path --sessions 20 --slowdown 0.3,0.15 --hog --hog-sessions 10
    python benchmarks/verdict_quality.py --sessions 20 --tolerances 0.05,0.10 --hog

``--baseline-file PATH`` keeps the saved baseline there, or, where PATH exists, judges against it instead
of saving one (a second command on the same machine reuses the first's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from pytest_dlperf.baseline import DEFAULT_TOLERANCE
from pytest_dlperf.baseline.document import index

CONFTEST = '''
import functools
import os
import subprocess
import sys
from pytest_dlperf import register_model


@functools.cache
def classes():
    """The models' classes, torch imported where a model is built (the worker): the session's controller, which
    only needs the registrations, never imports torch (3 s of CPU a session)."""
    import torch
    from torch import nn

    class Repeated(nn.Module):
        """A conv block applied DLPERF_VQ_COST times: the work per step, in known steps of 1/COST."""

        def __init__(self, cost, num_classes):
            super().__init__()
            self.cost = cost
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.block = nn.Conv2d(8, 8, 3, padding=1)
            self.head = nn.Linear(8, num_classes)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            for _ in range(self.cost):
                x = torch.relu(self.block(x))
            return self.head(x.mean((2, 3)))

    class Padded(nn.Module):
        """A model that trains DLPERF_VQ_PAD more samples than its batch (its first ones again) and returns
        the batch's outputs: every layer does (batch + pad) / batch times the work, forward and backward."""

        def __init__(self, model, pad):
            super().__init__()
            self.model, self.pad = model, pad

        def forward(self, x):
            n = x.shape[0]
            if self.pad:
                x = torch.cat([x, x[:self.pad]])
            return self.model(x)[:n]

    return Repeated, Padded


#: DLPERF_VQ_HELPERS=N: the model starts N helper processes of its own that spin until the worker ends, each with
#: a clean environment (as a library that shells out does): its own load, which must never excuse its slowdown.
SPIN = "import os\\nparent = os.getppid()\\nwhile os.getppid() == parent: pass\\n"


def helpers():
    for _ in range(int(os.environ.get("DLPERF_VQ_HELPERS", "0"))):
        subprocess.Popen([sys.executable, "-c", SPIN], env={})


@register_model("vq", task="image-classification", batch_size=16, defaults={"image_size": 12, "num_classes": 10})
def vq(settings):
    helpers()
    repeated, _ = classes()
    return repeated(int(os.environ.get("DLPERF_VQ_COST", "20")), settings["num_classes"])


if os.environ.get("DLPERF_VQ_MODEL"):  # --model: vq-<name>, a registered image-classification model, padded
    from pytest_dlperf.models.registry import get_model_spec

    BASE = get_model_spec(os.environ["DLPERF_VQ_MODEL"])

    def padded(settings):
        helpers()
        _, padded_class = classes()
        return padded_class(BASE.factory(settings), int(os.environ.get("DLPERF_VQ_PAD", "0")))

    register_model("vq-" + BASE.name, task=BASE.task, batch_size=BASE.batch_size, defaults=dict(BASE.defaults),
                   channels_last=BASE.channels_last, requires=dict(BASE.requires), factory=padded)
'''

HOG = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass\n"

#: Another job on the case's GPU: half-precision matrix products of 8192 x 8192, until its parent goes.
GPU_HOG = """
import os, torch
parent = os.getppid()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
while os.getppid() == parent:
    for _ in range(20):
        b = a @ a
    torch.cuda.synchronize()
"""

#: Another tenant of the host, as far as the case can tell: copies 64 MiB back and forth, busy for
#: the fraction ``DUTY`` of the time, taking memory bandwidth (the neighbour kind runs it with the
#: CPU rule off, as no process list shows another VM's tenant).
NEIGHBOUR = """
import os, time
parent, duty = os.getppid(), {duty}
src, dst = bytearray(64 << 20), bytearray(64 << 20)
while os.getppid() == parent:
    started = time.perf_counter()
    memoryview(dst)[:] = src
    if duty < 1:
        time.sleep((time.perf_counter() - started) * (1 - duty) / duty)
"""


def session(folder: Path, args: list[str], cost: dict[str, str], beside: list[str], timeout: float,
            keep: Path | None = None) -> dict:
    """One pytest session of the case; its verdict, runs, their memory probes and seconds.

    ``cost``: the environment that sets the case's work (``DLPERF_VQ_COST`` blocks of ``vq``, or
    ``DLPERF_VQ_PAD`` samples more of a ``--model``); ``beside``: the code of each process that runs
    beside it; ``keep``: where to copy the session's results document."""
    env = dict(os.environ, **cost)
    results = folder / "results.json"
    results.unlink(missing_ok=True)
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for code in beside]
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
                               "--dlperf-json", str(results), *args],
                              cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    seconds = time.monotonic() - started
    if not results.exists():
        raise SystemExit(f"the session wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-2000:]}")
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(results, keep)
    case = json.loads(results.read_text())["cases"][0]
    evidence = case.get("evidence") or {}
    probes = [r["memory_gbs"] for r in evidence.get("runs") or [] if r.get("memory_gbs")]
    cores = [r["core_gflops"] for r in evidence.get("runs") or [] if r.get("core_gflops")]
    estimate = (evidence.get("estimate") or {}).get("value")
    return {"verdict": case["verdict"], "throughput_verdict": case.get("throughput_verdict"), "estimate": estimate,
            "runs": len(evidence.get("runs") or []), "busy": sum(1 for r in evidence.get("runs") or [] if r["busy"]),
            "seconds": seconds, "message": case["message"] + (
                f"\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}" if case["verdict"] == "error" else ""),
            "said": [line for line in proc.stdout.splitlines() if line.startswith("dlperf: --dlperf-save-baseline: ")],
            "memory_gbs": statistics.median(probes) if probes else None,
            "core_gflops": statistics.median(cores) if cores else None}


def ratios(estimates: list[float | None], baseline: float) -> str:
    """The sessions' estimates over the baseline: median and range (sessions with no estimate left out)."""
    values = sorted(e / baseline for e in estimates if e)
    return f"{statistics.median(values):.3f} ({values[0]:.3f}-{values[-1]:.3f})" if values else "-"


class BudgetSpent(Exception):
    """--budget seconds have passed: no more sessions."""


def print_table(table: dict[tuple[float, str], list[dict]], figures: dict[str, float], started: float) -> None:
    """The table: per tolerance and kind, the sessions' verdicts, runs, busy runs, seconds and estimates."""
    print()
    print("tolerance | kind            | sessions | failed | inconclusive | passed | mean runs | "
          "on 1st run | busy runs | mean s | estimate / baseline (median, range)")
    print("----------+-----------------+----------+--------+--------------+--------+-----------+-"
          "-----------+-----------+--------+------------------------------------")
    for (tolerance, name), outcomes in table.items():
        failed = sum(o["verdict"] == "fail" for o in outcomes)
        unsure = sum(o["throughput_verdict"] == "inconclusive" and o["verdict"] != "fail" for o in outcomes)
        print(f"{100 * tolerance:8.0f}% | {name:15} | {len(outcomes):8} | {failed:6} | {unsure:12} | "
              f"{len(outcomes) - failed - unsure:6} | "
              f"{statistics.fmean(o['runs'] for o in outcomes):9.2f} | "
              f"{sum(o['runs'] == 1 and o['throughput_verdict'] != 'inconclusive' for o in outcomes):10} | "
              f"{sum(o['busy'] for o in outcomes):9} | "
              f"{statistics.fmean(o['seconds'] for o in outcomes):6.1f} | "
              + ratios([o["estimate"] for o in outcomes], figures[name]))
    print("failed: false alarms for unchanged, hog, neighbour, tenant, gpu_busy and fine, detections for slowed "
          "(tenant+slowed and helpers too); inconclusive: "
          "not decided (not failed: --dlperf-inconclusive pass, the default); on 1st run: decided by its first run; "
          "busy runs: runs measured beside a cause the message names (not counted)")
    print(f"total {time.monotonic() - started:.0f} s", flush=True)


def saved_tolerance_of(document: dict) -> float:
    """The tolerance a saved one-case baseline judges at, read as the plugin reads it
    (:func:`pytest_dlperf.baseline.document.index`: the entry's own, else the file's default, where
    ``--dlperf-save-baseline`` with ``--dlperf-tolerance`` puts it), else the plugin's default. The GPU check
    of 2026-11-26 (H100) read the entry alone, past the file's 3%, and judged its sessions at 5%."""
    tolerance = index(None, document)[0].tolerance
    return DEFAULT_TOLERANCE if tolerance is None else tolerance


#: Kinds whose sessions run with ``-o dlperf_max_interference=off`` (no run busy).
RULES_OFF = frozenset({"neighbour"})


def session_kinds(opts: argparse.Namespace, unchanged_cost: dict[str, str],
                  slowed_kinds: list[tuple[str, dict[str, str]]]) -> list[tuple[str, dict[str, str], list[str]]]:
    """The kinds of session the options ask for, each ``(name, the case's cost, the scripts run beside it)``;
    ``@N`` and ``~stale`` kinds, and ``fine``, are added where their baselines are made."""
    hog = [HOG] * (os.cpu_count() or 1)
    neighbour = [NEIGHBOUR.format(duty=opts.neighbour_duty)]
    slowed_name, slowed_cost = slowed_kinds[0]
    return [("unchanged", unchanged_cost, []), *((name, cost, []) for name, cost in slowed_kinds)] + \
        ([("hog", unchanged_cost, hog)] if opts.hog else []) + \
        ([("neighbour", unchanged_cost, neighbour)] if opts.neighbour_sessions else []) + \
        ([("tenant", unchanged_cost, neighbour), ("tenant+" + slowed_name, slowed_cost, neighbour)]
         if opts.tenant_sessions else []) + \
        ([("gpu_busy", unchanged_cost, [GPU_HOG])] if opts.gpu_busy_sessions else []) + \
        ([("helpers", {**unchanged_cost, "DLPERF_VQ_HELPERS": str(os.cpu_count() or 1)}, [])]
         if opts.helper_sessions else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="sessions of each kind per tolerance (default 3)")
    parser.add_argument("--tolerances", default="0.05",
                        help="comma list of baseline tolerances; saved: the one --dlperf-save-baseline wrote, from "
                             "the baseline runs' spread (default 0.05)")
    parser.add_argument("--slowdown", default="0.20",
                        help="the slowed kind's throughput loss, or several, comma-separated: one kind each, "
                             "slowed30 for 0.30 (default 0.20)")
    parser.add_argument("--user-path", action="store_true",
                        help="the path a user takes: save the baseline with the plugin's defaults (no --dlperf-runs, "
                             "no --dlperf-max-runs), judge every session at the tolerance the save wrote (--tolerances "
                             "saved) with the plugin's default --dlperf-max-runs")
    parser.add_argument("--save-tolerance", type=float, default=None,
                        help="--dlperf-tolerance of the save (the tolerance its baseline is written with; default: "
                             "the plugin's, 5%%): with --user-path, the tolerance every session is judged at")
    parser.add_argument("--hog", action="store_true", help="also run unchanged sessions beside a CPU-hogging process")
    parser.add_argument("--hog-sessions", type=int, default=None,
                        help="sessions beside the hog per tolerance (default: --sessions)")
    parser.add_argument("--neighbour-sessions", type=int, default=0,
                        help="unchanged sessions beside a process copying memory --neighbour-duty of the time, with "
                             "-o dlperf_max_interference=off: a tenant of the host only the memory probe sees "
                             "(default 0)")
    parser.add_argument("--tenant-sessions", type=int, default=0,
                        help="unchanged and slowed sessions (each this many) beside the process copying memory "
                             "--neighbour-duty of the time, judged by the plugin's own rules (default 0)")
    parser.add_argument("--neighbour-duty", type=float, default=0.5,
                        help="the share of the time the neighbour copies memory (default 0.5)")
    parser.add_argument("--gpu-busy-sessions", type=int, default=0,
                        help="unchanged sessions while another process runs matrix products on the same GPU "
                             "(--device cuda; default 0)")
    parser.add_argument("--helper-sessions", type=int, default=0,
                        help="sessions of the unchanged model that starts one spinning helper process per CPU with a "
                             "clean environment: slower by its own doing, which must FAIL, never be excused as busy "
                             "(default 0)")
    parser.add_argument("--baseline-file", type=Path, default=None,
                        help="keep the saved baseline here; where the file exists, judge against it and save none")
    parser.add_argument("--stale-sessions", type=int, default=0,
                        help="save a second baseline over a copy of the first beside a process copying memory "
                             "--stale-duty of the time (the CPU rule off: a tenant of the host), and judge this many "
                             "unchanged~stale and slowed~stale sessions against it (default 0)")
    parser.add_argument("--stale-duty", type=float, default=0.5,
                        help="the share of the time the stale baseline's neighbour copies memory (default 0.5)")
    parser.add_argument("--fine-sessions", type=int, default=0,
                        help="unchanged sessions judged at --fine-tolerance, a case far from its threshold (default 0)")
    parser.add_argument("--fine-tolerance", type=float, default=0.20,
                        help="the tolerance of the fine kind (default 0.20)")
    parser.add_argument("--baseline-sessions", type=int, default=1,
                        help="also judge unchanged and slowed sessions against a baseline made of this many "
                             "sessions' runs (dlperf baseline update --from ...; default 1: only the first's)")
    parser.add_argument("--cost", type=int, default=20, help="conv blocks per forward, unchanged (default 20)")
    parser.add_argument("--model", default="vq",
                        help="vq (default), or a registered image-classification model (resnet50): the slowed kind "
                             "trains --slowdown / (1 - --slowdown) of its batch more samples (the batch's first "
                             "ones again) and counts only the batch")
    parser.add_argument("--device", default="cpu", help="--dlperf-device of every session (default cpu)")
    parser.add_argument("--precision", default=None, help="--dlperf-precision (default: the plugin's, fp32)")
    parser.add_argument("--batch-size", type=int, default=None, help="--dlperf-batch-size (default: the model's)")
    parser.add_argument("--steps", default="2,5,3", help="warm-up steps, steps per window, windows (default 2,5,3)")
    parser.add_argument("--baseline-runs", type=int, default=3, help="runs of the saved baseline (default 3)")
    parser.add_argument("--max-runs", type=int, default=5, help="--dlperf-max-runs of each session (default 5)")
    parser.add_argument("--max-interference", default=None,
                        help="dlperf_max_interference of each session (default: the plugin's, 50; off: never busy)")
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS of every session's worker (default: the plugin's, one intra-op thread per CPU rank: dlperf_cpu_threads)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one session may take (default 600)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds in all: no session starts after them, and the table shows the sessions done")
    parser.add_argument("--verbose", action="store_true", help="print each session's message")
    parser.add_argument("--keep", type=Path, default=None,
                        help="copy each session's results document into this folder (TOLERANCE-KIND-N.json)")
    opts = parser.parse_args(argv)
    # SIGTERM as Ctrl-C: the running session is stopped and the hogs killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tolerances: list[float | None] = [None if t == "saved" else float(t) for t in opts.tolerances.split(",")]
    if opts.threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    warmup, steps, repeats = opts.steps.split(",")
    common = ["--dlperf-device", opts.device, "--dlperf-warmup-steps", warmup, "--dlperf-steps", steps,
              "-o", f"dlperf_repeats={repeats}"]
    common += ["--dlperf-precision", opts.precision] if opts.precision else []
    common += ["--dlperf-batch-size", str(opts.batch_size)] if opts.batch_size else []
    slowdowns = [float(v) for v in str(opts.slowdown).split(",")]
    if opts.user_path:
        tolerances = [None]
    slowed_kinds: list[tuple[str, dict[str, str]]] = []
    lines = []
    if opts.model == "vq":
        model = "vq"
        unchanged_cost = {"DLPERF_VQ_COST": str(opts.cost)}
        for slowdown in slowdowns:
            slowed = round(opts.cost / (1 - slowdown))
            slowed_kinds.append((f"slowed{round(100 * slowdown)}" if len(slowdowns) > 1 else "slowed",
                                 {"DLPERF_VQ_COST": str(slowed)}))
            lines.append(f"{slowed} blocks ({100 * (1 - opts.cost / slowed):.1f}% less throughput)")
        cost_line = f"cost: unchanged {opts.cost} blocks, slowed " + ", ".join(lines)
    else:
        from pytest_dlperf.models.registry import get_model_spec

        model, os.environ["DLPERF_VQ_MODEL"] = f"vq-{opts.model}", opts.model
        batch = opts.batch_size or get_model_spec(opts.model).batch_size
        unchanged_cost = {"DLPERF_VQ_PAD": "0"}
        for slowdown in slowdowns:
            pad = round(batch * slowdown / (1 - slowdown))
            if not 0 < pad <= batch:
                raise SystemExit(f"--slowdown {slowdown}: pads a batch of {batch} with {pad} samples; "
                                 f"expected 1 to {batch}")
            slowed_kinds.append((f"slowed{round(100 * slowdown)}" if len(slowdowns) > 1 else "slowed",
                                 {"DLPERF_VQ_PAD": str(pad)}))
            lines.append(f"{batch + pad} ({100 * pad / (batch + pad):.1f}% less throughput where the work is linear "
                         f"in the batch)")
        cost_line = f"cost: unchanged {batch} samples a step, slowed " + ", ".join(lines)
    slowed_cost = slowed_kinds[0][1]
    if opts.max_interference is not None:
        common += ["-o", f"dlperf_max_interference={opts.max_interference}"]
    with tempfile.TemporaryDirectory(prefix="dlperf-vq-") as tmp:
        folder = Path(tmp)
        (folder / "conftest.py").write_text(CONFTEST)
        started = time.monotonic()
        # Room to re-measure the baseline's busy runs (--dlperf-save-baseline wants --dlperf-runs counted).
        measure = [*common, "--dlperf-model", model]
        if not opts.user_path:  # the user's path: the plugin's own save (10 counted runs, room to re-measure)
            measure += ["--dlperf-runs", str(opts.baseline_runs), "--dlperf-max-runs", str(2 * opts.baseline_runs)]
        if opts.baseline_file is not None and opts.baseline_file.exists():
            shutil.copyfile(opts.baseline_file, folder / "base.json")
            saved = {"runs": "(reused)", "seconds": 0.0}
            print(f"baseline: reused {opts.baseline_file}")
        else:
            asked = ["--dlperf-tolerance", str(opts.save_tolerance)] if opts.save_tolerance is not None else []
            saved = session(folder, [*measure, *asked, "--dlperf-save-baseline", "base.json"], unchanged_cost, [],
                            opts.timeout, folder / "s0.json")
            if not (folder / "base.json").exists():  # too few quiet runs: the plugin saves no entry measured busy
                raise SystemExit(f"the baseline was not saved: {(saved.get('message') or 'see the session above').splitlines()[0]}; "
                                 "run again when the machine is quiet (or with --max-interference off)")
            if opts.baseline_file is not None:
                opts.baseline_file.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "base.json", opts.baseline_file)
        base = json.loads((folder / "base.json").read_text())
        entry = base["cases"][0]
        multi = None
        if opts.baseline_sessions > 1:
            for i in range(1, opts.baseline_sessions):
                session(folder, measure, unchanged_cost, [], opts.timeout, folder / f"s{i}.json")
            (folder / "multi.json").write_text(json.dumps(base))
            sources = [arg for i in range(opts.baseline_sessions) for arg in ("--from", f"s{i}.json")]
            subprocess.run([sys.executable, "-m", "pytest_dlperf", "baseline", "update", "multi.json", *sources],
                           cwd=folder, check=True, capture_output=True, text=True)
            multi = json.loads((folder / "multi.json").read_text())
            print(f"baseline of {opts.baseline_sessions} sessions: {multi['cases'][0]['throughput']:.1f} from runs "
                  f"{multi['cases'][0].get('runs')}, memory {multi['cases'][0].get('memory_gbs')} GB/s")
        print(f"baseline: {entry['throughput']:.1f} {entry['unit']} from {saved['runs']} runs "
              f"(medians {entry.get('runs')}, memory {entry.get('memory_gbs')} GB/s, core {entry.get('core_gflops')} "
              f"GFLOP/s, host probe {entry.get('host_runs')}), {saved['seconds']:.0f} s; "
              f"OMP_NUM_THREADS {os.environ.get('OMP_NUM_THREADS', 'the plugin default')}")
        stale = None
        if opts.stale_sessions:
            # A baseline saved in a slow minute of the host: over a copy of the first (the entry it replaces), beside
            # a tenant of the host that no process list shows (the CPU rule off), its busy runs re-measured.
            (folder / "stale.json").write_text(json.dumps(base))
            said = session(folder, [*measure, "-o", "dlperf_max_interference=off", "--dlperf-save-baseline",
                                    "stale.json"], unchanged_cost, [NEIGHBOUR.format(duty=opts.stale_duty)],
                           opts.timeout, folder / "stale-results.json")
            stale = json.loads((folder / "stale.json").read_text())
            old = stale["cases"][0]
            print(f"stale baseline (beside a neighbour copying memory {opts.stale_duty:g} of the time): "
                  f"{old['throughput']:.1f} {old['unit']} ({old['throughput'] / entry['throughput']:.3f} of the first) "
                  f"from {said['runs']} runs ({said['busy']} busy), memory {old.get('memory_gbs')} GB/s, core "
                  f"{old.get('core_gflops')} GFLOP/s; the save said: {' / '.join(said['said']) or 'nothing'}")
        budget = "the plugin's default max runs" if opts.user_path else f"max runs {opts.max_runs}"
        print(f"{cost_line}; {opts.sessions} session(s) of each kind per tolerance; {budget}")
        kinds = session_kinds(opts, unchanged_cost, slowed_kinds)
        at = f"@{opts.baseline_sessions}"
        if multi is not None:
            kinds += [("unchanged" + at, unchanged_cost, []), ("slowed" + at, slowed_cost, [])]
        if stale is not None:
            kinds += [("unchanged~stale", unchanged_cost, []), ("slowed~stale", slowed_cost, [])]

        def against_of(name: str) -> dict:
            return (multi if multi is not None and name.endswith(at) else
                    stale if stale is not None and name.endswith("~stale") else base)

        figures = {name: against_of(name)["cases"][0]["throughput"] for name, _, _ in kinds}
        figures["fine"] = entry["throughput"]
        table: dict[tuple[float, str], list[dict]] = defaultdict(list)
        saved_tolerance = saved_tolerance_of(base)
        print(f"the tolerance --dlperf-save-baseline gave it: {100 * saved_tolerance:g}%")
        for position, asked in enumerate(tolerances):
            tolerance = entry["tolerance"] = saved_tolerance if asked is None else asked
            (folder / "b.json").write_text(json.dumps(base))
            if multi is not None:
                multi["cases"][0]["tolerance"] = tolerance
                (folder / "m.json").write_text(json.dumps(multi))
            if stale is not None:
                stale["cases"][0]["tolerance"] = tolerance
                (folder / "s.json").write_text(json.dumps(stale))
            (folder / "fine.json").write_text(json.dumps({**base, "cases": [{**entry,
                                                                              "tolerance": opts.fine_tolerance}]}))
            runs = [] if opts.user_path else ["--dlperf-max-runs", str(opts.max_runs)]
            hogs = opts.sessions if opts.hog_sessions is None else opts.hog_sessions
            counts = {"unchanged": opts.sessions, **{name: opts.sessions for name, _ in slowed_kinds}, "hog": hogs,
                      "fine": opts.fine_sessions,
                      "neighbour": opts.neighbour_sessions, "gpu_busy": opts.gpu_busy_sessions,
                      "tenant": opts.tenant_sessions, "tenant+" + slowed_kinds[0][0]: opts.tenant_sessions,
                      "helpers": opts.helper_sessions,
                      "unchanged" + at: opts.sessions,
                      "slowed" + at: opts.sessions, "unchanged~stale": opts.stale_sessions,
                      "slowed~stale": opts.stale_sessions}
            chosen = kinds + ([("fine", unchanged_cost, [])] if opts.fine_sessions and position == 0 else [])
            try:
                for index in range(max(counts[name] for name, _, _ in chosen)):
                    for name, cost, beside in chosen:
                        if index >= counts[name]:
                            continue
                        fine = name == "fine"
                        against = ("fine.json" if fine else "m.json" if name.endswith(at) and multi else
                                   "s.json" if name.endswith("~stale") else "b.json")
                        args = [*common, "--dlperf-baseline", against, *runs]
                        if name in RULES_OFF:
                            args += ["-o", "dlperf_max_interference=off"]
                        judged = opts.fine_tolerance if fine else tolerance
                        keep = opts.keep / f"{judged:g}-{name}-{index + 1}.json" if opts.keep else None
                        if opts.budget is not None and time.monotonic() - started > opts.budget:
                            raise BudgetSpent
                        outcome = session(folder, args, cost, beside, opts.timeout, keep)
                        table[judged, name].append(outcome)
                        if opts.verbose:
                            memory = "" if outcome["memory_gbs"] is None else f", {outcome['memory_gbs']:.1f} GB/s"
                            memory += "" if outcome["core_gflops"] is None else f", {outcome['core_gflops']:.1f} GFLOP/s"
                            print(f"  tol {judged:g} {name} #{index + 1}: {outcome['verdict']} "
                                  f"({outcome['runs']} runs, {outcome['seconds']:.0f} s{memory}): {outcome['message']}",
                                  flush=True)
            except (KeyboardInterrupt, BudgetSpent) as stop:
                why = "interrupted" if isinstance(stop, KeyboardInterrupt) else f"--budget {opts.budget:g} s spent"
                print(f"\n{why}: the sessions done so far", flush=True)
                print_table(table, figures, started)
                return 130 if isinstance(stop, KeyboardInterrupt) else 0
        print_table(table, figures, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
