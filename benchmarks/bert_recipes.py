"""bert-base amp bs64 seq128 step variants side by side on one GPU: which recipe keeps the GPU busy (issue 42).

On an H200 the eager bert-base step measured 1,683 seq/s at a mean GPU utilization of 54%: the host, not the
GPU, set the figure. The variants, each the plugin's own :class:`~pytest_dlperf.worker.training.TrainingStep`
with one thing changed:

* ``built-in``: the eager step, as the plugin trained it on CUDA before this comparison and trains it on the CPU
  (AdamW fused on CUDA, transformers' default attention: sdpa);
* ``eager attention``: transformers' ``attn_implementation="eager"`` (the matmul-softmax-matmul of old);
* ``foreach AdamW``: ``AdamW(fused=False)``, to show what the fused step saves;
* ``compile``: ``torch.compile`` of the model (default mode), the loss and optimizer step eager, as
  ``--dlperf-set compile=true`` does;
* ``compile reduce-overhead``: ``--dlperf-set compile=true compile_mode=reduce-overhead`` (CUDA graphs:
  the forward and backward replayed with one launch each);
* ``compile reduce-overhead, eager attention``: a combination, for the attention's share under graphs: since
  2026-11-27 the recipe bert trains with on CUDA (``ModelSpec.cuda_compile``), chosen by this comparison.

A compiled variant without an attention of its own uses sdpa here (the model alone would take eager attention
when compiled).

Method: every variant's step is built once and warmed up untimed (``--warmup`` steps: a new model's first steps,
cuDNN's and cuBLAS's choices, the allocator's first blocks and a compiled variant's compilation are paid there;
the steps live side by side on the GPU), then ``--rounds`` rounds, each variant in every round after
``--round-warmup`` untimed steps, the order rotated by one each round so that no variant always follows the same
one; a variant's figure is the median of its rounds' medians of ``--repeats`` windows of ``--steps`` steps.
GPU utilization: the worker's own NVML sampler (:class:`pytest_dlperf.worker.telemetry.Telemetry`) over the
variant's windows, its mean. Printed as a table,
written as JSON (``--json``). ``--dry-run``: on the CPU, bert-tiny fp32 at batch 2, sequence 16 and a
vocabulary of 512, one step per window, the compiled variants left out (they compile for minutes on a CPU): it checks the code, not figures.

    python benchmarks/bert_recipes.py --json bert-recipes.json                  # on a GPU, about 2-3 minutes
    python benchmarks/bert_recipes.py --dry-run                                 # anywhere, in seconds

The compiled variants are settings a case can name already (``compile``, ``compile_mode``). A winning
variant becomes the built-in recipe only by this measurement on a GPU, with the host-work record of
tests/test_host_work.py updated in the same change.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from pytest_dlperf.cases import Case
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.worker.telemetry import Telemetry
from pytest_dlperf.worker.training import TrainingStep


@dataclass(frozen=True)
class Variant:
    name: str
    attention: str | None = None  # transformers' attn_implementation; None: the model's default
    fused: bool = True  # AdamW fused on CUDA (the built-in), else foreach
    compile_mode: str | None = None  # torch.compile's mode ("default", "reduce-overhead"); None: eager

    @property
    def compiled(self) -> bool:
        return self.compile_mode is not None


VARIANTS = (
    Variant("built-in"),
    Variant("eager attention", attention="eager"),
    Variant("foreach AdamW", fused=False),
    Variant("compile reduce-overhead", compile_mode="reduce-overhead"),
    Variant("compile", compile_mode="default"),
    Variant("compile reduce-overhead, eager attention", attention="eager", compile_mode="reduce-overhead"),
)


def rotated(items: list, round_: int) -> list:
    """``items`` rotated left by ``round_``: round 0 as given, round 1 from the second, ..."""
    shift = round_ % len(items) if items else 0
    return items[shift:] + items[:shift]


def make_step(variant: Variant, model: str, batch: int, settings: dict[str, Any], device: torch.device) -> TrainingStep:
    """The plugin's step of ``model`` amp (fp32 on the CPU) at ``batch`` with ``variant``'s one change."""
    spec = get_model_spec(model)
    attention = variant.attention or ("sdpa" if variant.compiled else None)  # the model picks eager when compiled
    if attention is not None:
        plain = spec.factory

        def factory(chosen, _plain=plain, _attention=attention):
            made = _plain(chosen)
            made.set_attn_implementation(_attention)
            return made

        spec = replace(spec, factory=factory)
    precision = "amp" if device.type == "cuda" else "fp32"
    if variant.compiled:  # as --dlperf-set compile=true compile_mode=MODE trains it
        settings = {**settings, "compile": True, "compile_mode": variant.compile_mode}
    chosen = spec.settings(settings)
    step = TrainingStep(spec, Case.make(model, precision, batch, settings=settings), chosen, device)
    if not variant.fused:
        step.optimizer = torch.optim.AdamW(step.model.parameters(), lr=1e-4, weight_decay=0.01, foreach=True)
    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(step: Callable[[], None], device: torch.device, samples: int, warmup: int, steps: int,
            repeats: int) -> dict[str, Any]:
    """``warmup`` steps, then ``repeats`` windows of ``steps`` steps under the NVML sampler: samples/s of
    each window and the mean GPU utilization (%) over them (None without NVML or a GPU)."""
    for _ in range(warmup):
        step()
    sync(device)
    windows = []
    with Telemetry([0] if device.type == "cuda" else None, interval=0.05) as sampler:
        for _ in range(repeats):
            sync(device)
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync(device)
            windows.append(samples * steps / (time.perf_counter() - start))
    gpus = sampler.summary().get("gpu", {}).get("devices") or {}
    utilization = [gpu["utilization_gpu"]["mean"] for gpu in gpus.values() if gpu.get("utilization_gpu")]
    return {"windows": windows, "throughput": statistics.median(windows),
            "gpu_util_mean": utilization[0] if utilization else None}


def build(variants: list[Variant], args: argparse.Namespace, settings: dict[str, Any], device: torch.device,
          deadline: float) -> list[tuple[Variant, TrainingStep]]:
    """Each variant's step, made and warmed up once, untimed (a compiled variant compiles here, once): the steps
    that could be made before ``deadline``; a variant that cannot run is said so and left out."""
    built = []
    for variant in variants:
        if time.monotonic() > deadline:
            print(f"  (--budget: {variant.name} not built, left out)", flush=True)
            continue
        print(f"  building {variant.name} (untimed warm-up of {args.warmup} steps) ...", flush=True)
        started = time.monotonic()
        try:
            step = make_step(variant, args.model, args.batch, settings, device)
            for _ in range(args.warmup):
                step()
            sync(device)
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run costs its row, said so
            print(f"  {variant.name:<42} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        print(f"  built {variant.name} in {time.monotonic() - started:.0f} s", flush=True)
        built.append((variant, step))
    return built


def run(variants: list[Variant], args: argparse.Namespace, device: torch.device,
        done: Callable[[list[dict[str, Any]]], None] = lambda rows: None) -> list[dict[str, Any]]:
    """Every variant built and warmed up once (untimed), then measured in every round (rotated order, a few
    untimed steps first: the switch from another variant is paid there); the rows, also handed to ``done``
    after each measurement (a step's time limit then leaves what was measured)."""
    settings = dict(args.settings)
    spec = get_model_spec(args.model)
    samples = spec.samples_per_batch(args.batch, spec.settings(settings))
    budget = args.budget if args.budget else float("inf")
    start = time.monotonic()
    # Building (compiling) takes at most 60% of the budget: the rounds need the rest.
    built = build(variants, args, settings, device, start + 0.6 * budget)
    deadline = start + budget
    rounds: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    for round_ in range(args.rounds):
        for variant, step in rotated(built, round_):
            if time.monotonic() > deadline:
                print(f"  (--budget spent: {variant.name}, round {round_ + 1}, left out)", flush=True)
                continue
            try:
                row = measure(step, device, samples, args.round_warmup, args.steps, args.repeats)
            except Exception as exc:  # noqa: BLE001 - said so; the other variants go on
                print(f"  {variant.name:<42} failed in round {round_ + 1}: {type(exc).__name__}: "
                      f"{str(exc)[:300]}", flush=True)
                continue
            rounds[variant.name].append(row)
            print(f"  round {round_ + 1}: {variant.name:<42} {row['throughput']:10.1f} seq/s  util "
                  f"{_pct(row['gpu_util_mean'])}", flush=True)
            done(medians(variants, rounds))
    return medians(variants, rounds)


def medians(variants: list[Variant], rounds: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A row per variant measured so far: the median of its rounds, its mean GPU utilization."""
    rows = []
    for variant in variants:
        done = rounds[variant.name]
        if not done:
            continue
        utils = [r["gpu_util_mean"] for r in done if r["gpu_util_mean"] is not None]
        rows.append({"variant": variant.name, "attention": variant.attention, "fused_adamw": variant.fused,
                     "compile_mode": variant.compile_mode, "rounds": len(done),
                     "throughput": statistics.median(r["throughput"] for r in done),
                     "round_throughputs": [r["throughput"] for r in done],
                     "gpu_util_mean": statistics.fmean(utils) if utils else None})
    return rows


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{value:3.0f}%"


def table(rows: list[dict[str, Any]]) -> str:
    """The variants: seq/s (median of rounds), / the built-in's, mean GPU utilization, rounds."""
    reference = next((r["throughput"] for r in rows if r["variant"] == VARIANTS[0].name), None)
    lines = [f"  {'variant':<42} {'seq/s':>10}  {'/built-in':>9}  {'GPU util':>8}  rounds"]
    for row in rows:
        ratio = f"{row['throughput'] / reference:.4f}" if reference else "-"
        lines.append(f"  {row['variant']:<42} {row['throughput']:10.1f}  {ratio:>9}  {_pct(row['gpu_util_mean']):>8}  "
                     f"{row['rounds']}")
    return "\n".join(lines)


def parse_set(text: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out.append((key, int(value)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="on the CPU: bert-tiny bs2 seq16, one step a window, no compiled variant (seconds)")
    parser.add_argument("--model", default="bert-base")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--set", dest="settings", type=parse_set, default=[("seq_len", 128)],
                        help="model settings, KEY=N,... (default seq_len=128)")
    parser.add_argument("--only", default="", help="variants by name, comma-separated (default: all)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps when a variant is built (default 10)")
    parser.add_argument("--round-warmup", type=int, default=3,
                        help="untimed steps before a variant's windows in each round (default 3)")
    parser.add_argument("--steps", type=int, default=20, help="steps per window (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="windows per variant and round (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every variant (default 3)")
    parser.add_argument("--budget", type=float, default=None, help="seconds: no variant starts after them")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    variants = list(VARIANTS)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",")]
        unknown = [name for name in wanted if name not in {v.name for v in VARIANTS}]
        if unknown:
            parser.error(f"--only: unknown variant(s) {', '.join(unknown)}; expected of: "
                         f"{', '.join(v.name for v in VARIANTS)}")
        variants = [v for v in VARIANTS if v.name in wanted]
    threads = torch.get_num_threads()
    if args.dry_run:
        args.model, args.batch, args.settings = "bert-tiny", 2, [("seq_len", 16), ("vocab_size", 512)]
        torch.set_num_threads(1)  # a shared CPU: threads that wait on each other only slow it
        args.warmup, args.round_warmup, args.steps, args.repeats, args.rounds = 1, 1, 1, 1, 2
        left = [v.name for v in variants if v.compiled]
        variants = [v for v in variants if not v.compiled]
        print(f"bert_recipes: dry run on the CPU; not run (they compile for minutes on a CPU): {', '.join(left)}")
        device = torch.device("cpu")
    elif torch.cuda.is_available():
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
    else:
        parser.error("no GPU: the figures need one (--dry-run checks the code on the CPU)")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"bert_recipes: {name}; torch {torch.__version__}; {args.model} bs{args.batch} "
          f"{dict(args.settings)}; warm-up {args.warmup}, {args.repeats} x {args.steps} steps, {args.rounds} rounds, "
          "order rotated each round", flush=True)
    started = time.monotonic()

    def save(rows: list[dict[str, Any]]) -> None:  # after each variant, and at the end: a time limit loses nothing
        if args.json:
            document = {"device": name, "torch": torch.__version__, "model": args.model, "batch": args.batch,
                        "settings": dict(args.settings), "warmup": args.warmup, "steps": args.steps,
                        "repeats": args.repeats, "rounds": args.rounds, "dry_run": args.dry_run, "variants": rows}
            partial = f"{args.json}.partial"
            with open(partial, "w", encoding="utf-8") as handle:
                json.dump(document, handle, indent=2)
            os.replace(partial, args.json)

    try:
        rows = run(variants, args, device, save)
    finally:
        torch.set_num_threads(threads)
    print(f"\n{args.model} bs{args.batch}: the median of each variant's rounds\n{table(rows)}")
    print(f"bert_recipes: {time.monotonic() - started:.0f} s")
    save(rows)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
