"""How much training throughput does the pytest-dlperf harness cost?  Harness vs a bare loop.

The project claims that a case measured by the harness runs within 2% of the throughput a
plain PyTorch training loop reaches on the same configuration.  This script checks that
claim side by side, in one invocation:

* **harness**: exactly what the plugin does for one case, ``pytest_dlperf.launch.workers.measure``
  with ``runs=1``: a fresh worker process, forked by the fork server as the plugin's runs are by
  default (``pytest_dlperf.launch.forkserver``), its warm-up, then ``--repeats`` windows of
  ``--steps`` steps timed between device synchronizations.
* **bare**: a self-contained ~50-line PyTorch loop (``BARE_LOOP`` below, no pytest_dlperf
  import), written to a temporary file and run with the same Python in a fresh process:
  the same model, one synthetic batch made on the device once, forward + cross-entropy +
  backward + SGD step + ``zero_grad(set_to_none=True)``, the same precision handling, the
  same warm-up and the same windows.  Torch's thread count is left at its default in both.

**Telemetry** (``--telemetry on|off|both``, default ``both``): the harness samples GPU
and host metrics in a background thread during the windows (``pytest_dlperf.worker.telemetry``).
With ``both`` the harness runs twice per pair, as ``harness`` (sampling on, the plugin's
default) and as ``harness-notel`` (``-o dlperf_no_telemetry=true``), so the cost of sampling
is measured side by side with the rest; ``on`` or ``off`` runs only one of them.

**Start** (``--start server|exec|both``, default ``server``): how the harness starts its workers.
``server``: forked by the fork server, as the plugin does; ``exec``: as fresh interpreters,
``python -m pytest_dlperf.worker`` (``dlperf_start = fresh``); ``both`` adds a ``harness-exec``
side (telemetry on, started fresh) beside the forked ones, so that a run's fixed cost is printed
with and without the server side by side.

The sides alternate, ``--pairs`` times each; the order rotates every pair (bare then
harness, harness then bare, ...; with three sides each takes each place in turn) so that
a slow drift of the machine (clock, temperature) does not favour one side.  A window's
throughput is its samples over its seconds; each side's figure is the median of all its
windows (as the plugin pools the windows of a case's runs).

Reading the output:

* one line per run as it finishes: its median window throughput, its windows, the seconds
  from process launch to the first warm-up step (``setup``) and ``wall/measured``, the
  run's whole wall time over the time spent in the timed windows;
* ``ratio``: harness median / bare median, for each harness side.  ``overhead`` is
  ``1 - ratio`` (negative when the harness came out faster: noise).  ``PASS`` when every
  harness side's ``overhead <= --max-overhead``;
* ``telemetry on/off``: with ``both``, harness median / harness-notel median, the cost of
  sampling alone (``1 -`` it);
* ``per-case cost``: the medians of ``setup`` and ``wall/measured`` per side.  These are
  the time a case costs beyond its measured windows (process start, imports, model
  build, warm-up); they do not enter the throughput figure.  The bare column shows how
  much of it any fresh PyTorch process pays anyway;
* ``phases``: where a harness step's time went, the median over its runs of each phase's share of a step
  (``pytest_dlperf.worker.phases``: data, forward, backward, optimizer, other), timed in every window;
* ``per-run fixed cost``: each side's ``setup`` (process start to the first warm-up step),
  its median and every run's, side by side, and the fork server's own start (its imports),
  which a session pays once: in the first run that needs the server, left out of that side's
  medians.

On a CPU the windows are noisy: a few percent on an idle 2-core machine, and far worse
when anything else runs there (torch's OpenMP threads then lose whole time slices; windows
ten times slower than their neighbours happen).  Each side's ``cv`` (coefficient of
variation of its windows) says how far to trust the ratio: when either is above
``--max-overhead`` a ``NOISY`` line precedes the verdict (the exit status is unchanged).
More ``--pairs`` and longer windows (``--steps``) narrow it.  The real check is on a GPU::

    python benchmarks/overhead.py --model resnet50 --precision amp --batch-size 256 \\
        --image-size 224 --device cuda

Exit status: 0 within ``--max-overhead``, 1 outside it, 2 when a run failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_dlperf.cases import PRECISIONS, Case
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.launch import forkserver
from pytest_dlperf.launch.workers import CaseError, RunParams, measure
from pytest_dlperf.worker import phases as step_phases

SIDES = ("bare", "harness", "harness-notel", "harness-exec")
# side: (telemetry on, started by the fork server unless --start exec)
HARNESS_SIDES = {"harness": (True, True), "harness-notel": (False, True), "harness-exec": (True, False)}
TELEMETRY_MODES = {"on": ("bare", "harness"), "off": ("bare", "harness-notel"), "both": SIDES[:3]}
START_MODES = ("auto", "server", "exec", "both")
# The models the bare loop can build: torchvision's by name, and the registry's ``tiny``.
MODELS = ("tiny", "resnet18", "resnet50", "vgg16")
# Warm-up and windows: the plugin's defaults (those of RunParams) on CUDA, fewer on a CPU.
STEP_DEFAULTS = {
    "cuda": {"warmup_steps": RunParams.warmup_steps, "steps": RunParams.steps, "repeats": RunParams.repeats},
    "cpu": {"warmup_steps": 10, "steps": 20, "repeats": 4},
}

BARE_LOOP = '''\
"""Bare PyTorch training loop: the reference the pytest-dlperf harness is compared with."""
import json, sys, time

import torch
import torch.nn.functional as F
from torch import nn

cfg = json.loads(sys.argv[1])
precision, batch, size, classes = cfg["precision"], cfg["batch_size"], cfg["image_size"], cfg["num_classes"]
device = torch.device("cuda", 0) if cfg["device"] == "cuda" else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
torch.backends.cudnn.benchmark = True
if cfg["model"] == "tiny":
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                          nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(inplace=True),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))
else:
    import torchvision
    model = torchvision.models.get_model(cfg["model"], weights=None, num_classes=classes)
dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(precision)
channels_last = dtype is not None  # every model here is a CNN
model = model.to(device)
images = torch.randn(batch, 3, size, size, device=device)
labels = torch.randint(0, classes, (batch,), device=device)
if channels_last:
    model = model.to(memory_format=torch.channels_last)
    images = images.contiguous(memory_format=torch.channels_last)
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler(device.type, init_scale=128.0) if precision == "amp" else None


def step():
    if dtype is not None:
        with torch.autocast(device.type, dtype=dtype):
            loss = F.cross_entropy(model(images), labels)
    else:
        loss = F.cross_entropy(model(images), labels)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)


first_step = time.time()
for _ in range(cfg["warmup_steps"]):
    step()
windows = []
for _ in range(cfg["repeats"]):
    sync()
    start = time.perf_counter()
    for _ in range(cfg["steps"]):
        step()
    sync()
    seconds = time.perf_counter() - start
    windows.append({"seconds": seconds, "throughput": batch * cfg["steps"] / seconds})
print(json.dumps({"windows": windows, "setup_seconds": first_step - cfg["launched_at"],
                  "settings": {"image_size": size, "num_classes": classes, "channels_last": channels_last}}))
'''


class RunFailed(Exception):
    """A bare or harness run that produced no measurement."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One finished run of either side."""

    pair: int
    side: str  # one of SIDES
    throughputs: list[float]
    setup_seconds: float
    wall_seconds: float
    measured_seconds: float
    settings: dict[str, Any]
    device: dict[str, Any] | None = None
    server_seconds: float | None = None  # the fork server this run started first: its start (imports)
    phases: dict[str, float] | None = None  # harness: each phase's share of a step, its windows pooled

    @property
    def median(self) -> float:
        return statistics.median(self.throughputs)

    @property
    def wall_over_measured(self) -> float:
        return self.wall_seconds / self.measured_seconds

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "median": self.median, "wall_over_measured": self.wall_over_measured}


def resolve_device(requested: str) -> str:
    """``auto`` is CUDA when available, as in the plugin (without creating a CUDA context here)."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_bare(script: Path, config: dict[str, Any], pair: int) -> Run:
    """Run the bare loop once in a fresh process; wall time counts from just before its launch."""
    launched = time.time()
    start = time.monotonic()
    # A session of its own, as process.run_worker gives a worker (and with it the same
    # scheduler autogroup treatment where the kernel groups by session).
    proc = subprocess.run([sys.executable, str(script), json.dumps(dict(config, launched_at=launched))],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RunFailed(f"the bare loop failed with exit status {proc.returncode}:\n{tail}")
    out = json.loads(proc.stdout.splitlines()[-1])
    return Run(pair, "bare", [w["throughput"] for w in out["windows"]], out["setup_seconds"], wall,
               sum(w["seconds"] for w in out["windows"]), out["settings"])


def run_harness(case: Case, params: RunParams, workdir: Path, pair: int, side: str = "harness") -> Run:
    """Measure the case once as the plugin does: one fresh worker through ``launch.workers.measure`` (forked by
    the fork server unless the side or ``params`` say otherwise)."""
    telemetry, fork = HARNESS_SIDES[side]
    params = dataclasses.replace(params, telemetry=telemetry, fork_server=params.fork_server and fork)
    before = {server.pid for server in forkserver.servers()}
    try:
        record = measure(case, get_model_spec(case.model), params, workdir)[0]
    except CaseError as exc:
        raise RunFailed(f"the harness failed ({exc.kind}): {exc.message}") from None
    if (record.telemetry is not None) != params.telemetry:
        raise RunFailed(f"the {side} run {'lacks' if params.telemetry else 'has'} telemetry")
    started = [server.start_seconds for server in forkserver.servers() if server.pid not in before]
    timing = record.timing
    pooled = step_phases.pooled(record.windows)
    return Run(pair, side, [w["throughput"] for w in record.windows], timing["setup_seconds"],
               record.wall_seconds, timing["measured_seconds"], record.settings or {}, record.device,
               started[0] if started else None, pooled.shares() if pooled is not None else None)


def check_same_settings(bare: Run, harness: Run) -> None:
    """The two sides must have trained the same configuration."""
    differ = {key: (value, harness.settings.get(key)) for key, value in bare.settings.items()
              if harness.settings.get(key) != value}
    if differ:
        raise RunFailed(f"the bare loop and the harness trained different settings (bare, harness): {differ}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, default="resnet18", help="default: %(default)s")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32", help="default: %(default)s")
    parser.add_argument("--batch-size", type=int, default=32, help="default: %(default)s")
    parser.add_argument("--image-size", type=int, default=64,
                        help="the case setting image_size; default: %(default)s")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto: CUDA when available; default: %(default)s")
    cuda, cpu = STEP_DEFAULTS["cuda"], STEP_DEFAULTS["cpu"]
    parser.add_argument("--warmup-steps", type=int,
                        help=f"default: {cuda['warmup_steps']} on CUDA, {cpu['warmup_steps']} on CPU")
    parser.add_argument("--steps", type=int,
                        help=f"steps per timed window; default: {cuda['steps']} on CUDA, {cpu['steps']} on CPU")
    parser.add_argument("--repeats", type=int,
                        help=f"timed windows per run; default: {cuda['repeats']} on CUDA, {cpu['repeats']} on CPU")
    parser.add_argument("--pairs", type=int, default=3,
                        help="bare and harness runs each, alternating; default: %(default)s")
    parser.add_argument("--telemetry", choices=tuple(TELEMETRY_MODES), default="both",
                        help="the harness with telemetry sampling on, off, or both side by side; "
                             "default: %(default)s")
    parser.add_argument("--start", choices=START_MODES, default="auto",
                        help="how the harness starts its workers: as the plugin does (auto: forked by the fork server "
                             "on the CPU, fresh on a GPU), forked (server), as fresh interpreters (exec, "
                             "dlperf_start = fresh), or both side by side (a harness-exec side); default: %(default)s")
    parser.add_argument("--max-overhead", type=float, default=0.02,
                        help="largest allowed throughput loss of the harness, as a fraction; default: %(default)s")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    for name in ("batch_size", "image_size", "steps", "repeats", "pairs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_steps is not None and args.warmup_steps < 0:
        parser.error("--warmup-steps must not be negative")
    return args


def summarize(runs: list[Run], max_overhead: float) -> dict[str, Any]:
    """Each side's pooled median and per-case cost, the ratios harness/bare and the verdict.

    ``ratio``, ``overhead`` and ``pair_ratios`` are those of the first harness side run
    (``harness``, with telemetry, unless only ``harness-notel`` ran); ``harness`` has them
    for each harness side, and ``telemetry_ratio`` is harness / harness-notel when both ran.
    """
    sides: dict[str, dict[str, Any]] = {}
    present = [side for side in SIDES if any(r.side == side for r in runs)]
    for side in present:
        mine = [r for r in runs if r.side == side]
        values = [t for r in mine for t in r.throughputs]
        # A run's fixed cost: not the fork server's start, which a session pays once (its first run), where
        # other runs show the cost without it.
        steady = [r for r in mine if r.server_seconds is None] or mine
        sides[side] = {
            "median": statistics.median(values),
            "windows": len(values),
            "cv": statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0,
            "setup_seconds": statistics.median([r.setup_seconds for r in steady]),
            "setups": [round(r.setup_seconds, 3) for r in steady],
            "wall_over_measured": statistics.median([r.wall_over_measured for r in steady]),
            "server_seconds": next((r.server_seconds for r in mine if r.server_seconds is not None), None),
        }
    by_pair = {(r.pair, r.side): r.median for r in runs}
    pairs = sorted({r.pair for r in runs})
    harness: dict[str, dict[str, Any]] = {}
    for side in (s for s in present if s in HARNESS_SIDES):
        ratio = sides[side]["median"] / sides["bare"]["median"]
        harness[side] = {"ratio": ratio, "overhead": 1.0 - ratio,
                         "pair_ratios": [by_pair[p, side] / by_pair[p, "bare"] for p in pairs]}
    main = harness[next(iter(harness))]
    out = {
        "sides": sides,
        "harness": harness,
        "pair_ratios": main["pair_ratios"],
        "ratio": main["ratio"],
        "overhead": main["overhead"],
        "max_overhead": max_overhead,
        "passed": all(h["overhead"] <= max_overhead for h in harness.values()),
        "noisy": max(figure["cv"] for figure in sides.values()) > max_overhead,
    }
    if "harness" in harness and "harness-notel" in harness:
        ratio = sides["harness"]["median"] / sides["harness-notel"]["median"]
        out["telemetry_ratio"] = ratio
        out["telemetry_pair_ratios"] = [by_pair[p, "harness"] / by_pair[p, "harness-notel"] for p in pairs]
    return out


def _print_run(run: Run, unit: str) -> None:
    windows = " ".join(f"{t:.1f}" for t in run.throughputs)
    print(f"{run.pair + 1:>4}  {run.side:<13}  {run.median:>10.1f} {unit}  [{windows}]  "
          f"setup {run.setup_seconds:5.2f} s  wall/measured {run.wall_over_measured:5.2f}", flush=True)


def print_fixed_costs(summary: dict[str, Any], sides: tuple[str, ...], fork: bool) -> None:
    """Each side's per-run fixed cost, process start to first warm-up step, side by side; and the fork server's
    own start, which the first run that needed it paid (once per session)."""
    def how(side: str) -> str:
        if side == "bare":
            return "bare loop, fresh interpreter"
        return "fork server" if fork and HARNESS_SIDES[side][1] else "fresh interpreter (exec)"

    print("per-run fixed cost, process start to first warm-up step (median; each run):")
    for side in sides:
        figure = summary["sides"][side]
        print(f"  {side:<13} {figure['setup_seconds']:6.2f} s  ({how(side)}; "
              f"{' '.join(f'{s:.2f}' for s in figure['setups'])})")
    for side in sides:
        if summary["sides"][side]["server_seconds"] is not None:
            print(f"  the fork server's own start (imports, once per session; in {side}'s first run, left out "
                  f"above): {summary['sides'][side]['server_seconds']:.2f} s")


def print_phases(runs: list[Run]) -> None:
    """Each harness side's phases: the median over its runs of each phase's share of a step."""
    for side in dict.fromkeys(r.side for r in runs if r.phases is not None):
        shares = [r.phases for r in runs if r.side == side and r.phases is not None]
        names = dict.fromkeys(name for share in shares for name in share)
        medians = ", ".join(f"{name} {statistics.median(s.get(name, 0.0) for s in shares):.1%}" for name in names)
        print(f"phases of a {side} step (median share over {len(shares)} runs): {medians}")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # Unwind like Ctrl-C: the running worker's group and bare process are killed, the temp dir removed.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    device = resolve_device(args.device)
    defaults = STEP_DEFAULTS[device]
    params = RunParams(
        device=device,
        warmup_steps=defaults["warmup_steps"] if args.warmup_steps is None else args.warmup_steps,
        steps=defaults["steps"] if args.steps is None else args.steps,
        repeats=defaults["repeats"] if args.repeats is None else args.repeats,
    )
    case = Case.make(args.model, args.precision, args.batch_size, settings={"image_size": args.image_size})
    spec = get_model_spec(case.model)
    bare_config = {
        "model": case.model, "precision": case.precision, "batch_size": case.batch_size,
        "image_size": args.image_size, "num_classes": int(spec.settings(case.settings_dict)["num_classes"]),
        "device": device, "warmup_steps": params.warmup_steps, "steps": params.steps, "repeats": params.repeats,
    }
    if args.start == "auto":
        args.start = "server" if forkserver.uses_server("auto", device) else "exec"
    params = dataclasses.replace(params, fork_server=args.start != "exec")
    sides = TELEMETRY_MODES[args.telemetry] + (("harness-exec",) if args.start == "both" else ())
    print(f"harness vs bare loop: {case.id} on {device}, warm-up {params.warmup_steps} steps, "
          f"{params.repeats} windows x {params.steps} steps per run, {args.pairs} pairs; "
          f"telemetry {args.telemetry}, workers {'forked by the fork server' if params.fork_server else 'exec-ed'} "
          f"(sides: {', '.join(sides)})", flush=True)
    print(f"{'pair':>4}  {'side':<13}  {'median':>10} {spec.unit}  [windows]", flush=True)

    runs: list[Run] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlperf-overhead-") as tmp:
        workdir = Path(tmp)
        script = workdir / "bare_loop.py"
        script.write_text(BARE_LOOP, encoding="utf-8")
        try:
            for pair in range(args.pairs):
                shift = pair % len(sides)
                order = sides[shift:] + sides[:shift]
                done: dict[str, Run] = {}
                for side in order:
                    if side == "bare":
                        run = run_bare(script, bare_config, pair)
                    else:
                        run = run_harness(case, params, workdir / f"pair{pair}-{side}", pair, side)
                    done[side] = run
                    runs.append(run)
                    _print_run(run, spec.unit)
                for side in sides[1:]:
                    check_same_settings(done["bare"], done[side])
        except RunFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    elapsed = time.monotonic() - started

    summary = summarize(runs, args.max_overhead)
    device_info = next(r.device for r in runs if r.side != "bare") or {}
    print()
    print(f"device: {device_info.get('name', device)}; {elapsed:.0f} s in all")
    for side, figures in summary["harness"].items():
        print(f"pair ratios {side}/bare: {' '.join(f'{r:.4f}' for r in figures['pair_ratios'])}")
    for side in sides:
        figure = summary["sides"][side]
        print(f"{side:<13}  median {figure['median']:.1f} {spec.unit} over {figure['windows']} windows "
              f"(cv {figure['cv']:.1%})")
    for side, figures in summary["harness"].items():
        print(f"ratio {side}/bare: {figures['ratio']:.4f} "
              f"(overhead {figures['overhead']:+.2%}, limit {args.max_overhead:.2%})")
    print_phases(runs)
    if "telemetry_ratio" in summary:
        print(f"telemetry on/off (harness/harness-notel): {summary['telemetry_ratio']:.4f} "
              f"(cost of sampling {1 - summary['telemetry_ratio']:+.2%}; pairs "
              f"{' '.join(f'{r:.4f}' for r in summary['telemetry_pair_ratios'])})")
    costs = "; ".join(f"{side}: setup {summary['sides'][side]['setup_seconds']:.2f} s, wall/measured "
                      f"{summary['sides'][side]['wall_over_measured']:.2f}" for side in sides)
    print(f"per-case cost (medians): {costs}")
    print_fixed_costs(summary, sides, params.fork_server)
    if summary["noisy"]:
        worst = max(figure["cv"] for figure in summary["sides"].values())
        print(f"NOISY: windows vary by up to {worst:.1%} (cv), more than the limit; the ratio and "
              f"the verdict below are not reliable")
    passed = summary["passed"]
    print(f"{'PASS' if passed else 'FAIL'}: the harness is {'within' if passed else 'outside'} "
          f"{args.max_overhead:.2%} of the bare loop's throughput "
          f"({'with and without telemetry' if args.telemetry == 'both' else 'telemetry ' + args.telemetry})")

    if args.json is not None:
        document = {"case": case.to_dict(), "params": params.to_dict(), "device": device_info,
                    "pairs": args.pairs, "telemetry": args.telemetry, "start": args.start,
                    "elapsed_seconds": elapsed,
                    "runs": [r.to_dict() for r in runs],
                    **summary}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
