"""Where a GPU step's time goes: one-rank DDP against the plain step, and BERT's idle GPU, in one process.

Two questions the first GPU run left open (issue 27), answered side by side on one GPU in about a
minute, with the plugin's own training step (:class:`pytest_dlperf.worker.training.TrainingStep`):

* ``ddp``: ResNet-50 AMP bs256 measured 6.8% slower as a one-rank torchrun + NCCL job than as a
  plain process (H200, 2026-11-25). The same process times, interleaved: the plain step; the step
  of a one-rank ``DistributedDataParallel`` with DDP's defaults; with ``gradient_as_bucket_view``
  (as the worker wraps it); with ``static_graph``; with no buffer broadcast; all three; and each of
  the plain and DDP steps with torch's fused SGD, whose step takes the GradScaler's inf check on
  the GPU (the foreach SGD's ``scaler.step`` reads it on the host: a synchronization every step,
  which exposes whatever host time the step has).
* ``bert``: bert-base AMP bs64 kept the GPU 74% busy where ResNet-50 and GPT-2 kept it 97-100%.
  Timed: the plugin's step (NVIDIA's recipe: the MLM head on the masked positions only, no
  attention mask); the same with the batch's all-ones attention mask (transformers reads a mask's
  values to see whether it may drop it); and with the MLM head on every position.

For each variant: throughput (median of its windows), NVML's GPU utilization over the windows
(mean), the synchronizing CUDA calls in one step (``torch.cuda.set_sync_debug_mode``), and the
host seconds of one step issued right after a synchronization (the launch time, plus any wait a
synchronization inside the step makes). The first variant's warm-up runs once untimed, then the
variants of a question alternate in two rounds, so neither a new model's first steps nor a drift of
the GPU favours one. On the CPU (``--device cpu``, gloo, small settings) the script runs every
variant as a dry run; its figures mean nothing there.

    python benchmarks/gpu_diagnose.py --device cuda --json diag.json
    python benchmarks/gpu_diagnose.py --device cpu --quick          # the dry run: every path, in seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from pytest_dlperf.cases import Case
from pytest_dlperf.models import ensure_registered
from pytest_dlperf.worker.training import TrainingStep, uses_channels_last

Variant = tuple[str, Callable[[], TrainingStep]]


class Utilization:
    """NVML's GPU utilization, sampled every 50 ms from a thread while it runs (None without NVML)."""

    def __init__(self, index: int | None):
        self.samples: list[int] = []
        self.handle = None
        if index is None:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001 - no NVML: no utilization
            self.handle = None

    def __enter__(self) -> Utilization:
        self.samples, self.stop = [], threading.Event()
        if self.handle is not None:
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            self.samples.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.handle is not None:
            self.thread.join()

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def syncs_in_one_step(step: TrainingStep) -> int | None:
    """The synchronizing CUDA calls one step makes (torch's sync debug mode); None on the CPU."""
    if step.device.type != "cuda":
        return None
    sync(step.device)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    sync(step.device)
    return sum("synchroniz" in str(w.message) for w in seen)


def measure(name: str, make: Callable[[], TrainingStep], samples: int, warmup: int, steps: int, repeats: int,
            util: Utilization, host_steps: int = 3) -> dict[str, Any]:
    step = make()
    for _ in range(warmup):
        step()
    sync(step.device)
    windows = []
    with util:
        for _ in range(repeats):
            sync(step.device)
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync(step.device)
            windows.append(samples * steps / (time.perf_counter() - start))
    host = []
    for _ in range(host_steps):
        sync(step.device)
        start = time.perf_counter()
        step()
        host.append(time.perf_counter() - start)
    syncs = syncs_in_one_step(step)
    out = {"variant": name, "throughput": statistics.median(windows), "windows": windows,
           "gpu_util_mean": util.mean, "syncs_per_step": syncs, "host_seconds_per_step": statistics.median(host),
           "step_seconds": samples / statistics.median(windows)}
    del step
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def show(row: dict[str, Any], reference: float | None) -> str:
    ratio = f"{row['throughput'] / reference:.4f}" if reference else "-"
    util = "-" if row["gpu_util_mean"] is None else f"{row['gpu_util_mean']:.0f}%"
    syncs = "-" if row["syncs_per_step"] is None else str(row["syncs_per_step"])
    return (f"  {row['variant']:<32} {row['throughput']:10.1f}  {ratio:>7}  util {util:>4}  syncs/step {syncs:>2}  "
            f"host {1000 * row['host_seconds_per_step']:7.1f} ms of {1000 * row['step_seconds']:7.1f} ms")


def run_question(title: str, variants: list[Variant], samples: int, args: argparse.Namespace,
                 util: Utilization, deadline: float) -> list[dict[str, Any]]:
    """Every variant, in two rounds (the second in reverse order); a variant's figure is its better round."""
    print(f"\n{title}", flush=True)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    # The question's first model, its warm-up run once untimed: a new model's first steps (cuDNN's and
    # cuBLAS's choices, the allocator's first blocks) are paid here, not by whichever variant comes first.
    # Without it, on an H100 (2026-11-26, one round), BERT's first variant read 10% below one that did
    # more work after it.
    if variants and time.monotonic() < deadline:
        try:
            primer = variants[0][1]()
            for _ in range(max(args.warmup, 1) + args.steps):
                primer()
            sync(primer.device)
            del primer
        except Exception:  # noqa: BLE001 - the variant's own measurement says why it cannot run
            pass
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    for round_ in range(args.rounds):
        order = variants if round_ % 2 == 0 else list(reversed(variants))
        for name, make in order:
            if time.monotonic() > deadline:
                print(f"  (--budget spent: {name} round {round_ + 1} left out)", flush=True)
                continue
            try:
                row = measure(name, make, samples, args.warmup, args.steps, args.repeats, util, args.host_steps)
            except Exception as exc:  # noqa: BLE001 - one variant that cannot run costs its row, not the others
                print(f"  {name:<32} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                continue
            row["round"] = round_ + 1
            rows[name].append(row)
            print(show(row, None) + f"  (round {round_ + 1})", flush=True)
    best = [max(r, key=lambda x: x["throughput"]) | {"rounds": [x["throughput"] for x in r]}
            for r in rows.values() if r]
    reference = best[0]["throughput"] if best and best[0]["variant"] == variants[0][0] else None
    print(f"{title}: the better round of each, / the first variant's")
    for row in best:
        print(show(row, reference))
    return best


def ddp_variants(device: torch.device, args: argparse.Namespace) -> tuple[list[Variant], int]:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend, rank=0, world_size=1, **kwargs)
    spec = ensure_registered(args.ddp_model, None, None)
    settings = spec.settings(dict(args.ddp_set))
    case = Case.make(args.ddp_model, args.ddp_precision, args.ddp_batch, settings=dict(args.ddp_set))
    settings["channels_last"] = uses_channels_last(spec, case.precision, settings)
    ids = [device.index] if device.type == "cuda" else None

    def ddp(**options):
        def wrap(model):
            with warnings.catch_warnings():  # broadcast_buffers: deprecated in newer torch, the only name in older
                warnings.simplefilter("ignore", FutureWarning)
                return DDP(model, device_ids=ids, **options)
        return wrap

    def step(wrap=None, fused=False):
        def make():
            made = TrainingStep(spec, case, settings, device, wrap=wrap)
            if fused:
                made.optimizer = torch.optim.SGD(made.model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4,
                                                 fused=True)
            return made
        return make

    fused = device.type == "cuda"  # torch's fused SGD is a CUDA kernel
    variants: list[Variant] = [
        ("plain", step()),
        ("ddp defaults", step(ddp())),
        ("ddp bucket view (the worker's)", step(ddp(gradient_as_bucket_view=True))),
        ("ddp static_graph", step(ddp(static_graph=True))),
        ("ddp no buffer broadcast", step(ddp(broadcast_buffers=False))),
        ("ddp bucket-view+static+nobcast", step(ddp(gradient_as_bucket_view=True, static_graph=True,
                                                     broadcast_buffers=False))),
    ]
    if fused:
        variants += [("plain, fused SGD", step(fused=True)), ("ddp, fused SGD", step(ddp(), fused=True))]
    return variants, spec.samples_per_batch(args.ddp_batch, settings)


def bert_variants(device: torch.device, args: argparse.Namespace) -> tuple[list[Variant], int]:
    import torch.nn.functional as F

    from pytest_dlperf.models.language import bert_pretraining_loss

    spec = ensure_registered(args.bert_model, None, None)
    settings = spec.settings(dict(args.bert_set))
    case = Case.make(args.bert_model, "amp" if device.type == "cuda" else "bf16", args.bert_batch,
                     settings=dict(args.bert_set))
    settings["channels_last"] = False

    def with_mask(model, batch):
        # The plugin's loss with the batch's all-ones attention mask given: transformers reads its values on
        # the host to see whether it may drop it.
        positions = batch["masked_positions"]
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                    attention_mask=batch["attention_mask"], masked_positions=positions)
        mlm = F.cross_entropy(out.prediction_logits.flatten(0, 1), batch["labels"].gather(1, positions).flatten())
        return mlm + F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"])

    def step(loss=None):
        def make():
            made = TrainingStep(spec, case, settings, device)
            if loss is not None:
                made.loss_fn = loss
            return made
        return make

    variants: list[Variant] = [("as the plugin trains it", step()), ("with the attention mask", step(with_mask)),
                               ("MLM head on every position", step(bert_pretraining_loss))]
    return variants, spec.samples_per_batch(args.bert_batch, settings)


def parse_set(text: str) -> list[tuple[str, Any]]:
    out = []
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out.append((key, int(value) if value.isdigit() else value))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a dry run of every path)")
    parser.add_argument("--only", default="ddp,bert", help="questions, comma-separated (ddp,bert)")
    parser.add_argument("--quick", action="store_true", help="tiny settings (the CPU dry run)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20, help="steps per window (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="windows per variant and round (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every variant (default 2)")
    parser.add_argument("--budget", type=float, default=None, help="seconds: no variant starts after them")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    args.host_steps = 3  # steps timed one by one for the host's seconds of a step
    started = time.monotonic()
    deadline = started + args.budget if args.budget else float("inf")
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    args.ddp_model, args.ddp_precision, args.ddp_batch, args.ddp_set = "resnet50", "amp", 256, []
    args.bert_model, args.bert_batch, args.bert_set = "bert-base", 64, []
    if device.type == "cpu" or args.quick:
        args.ddp_model, args.ddp_precision, args.ddp_batch = "resnet50", "fp32", 4
        args.ddp_set = [("image_size", 32)]
        args.bert_model, args.bert_batch, args.bert_set = "bert-tiny", 4, [("seq_len", 32)]
        if args.quick:  # every path once, as cheaply as it runs: the dry run checks the code, not the figures
            # tiny (a convnet with batch norm: buffers to broadcast) and a 512-word BERT: the dry run's 26 CPU-s
            # were resnet18's 120 ms steps and the MLM head over 30,522 words at every position (800 ms a step).
            args.ddp_model, args.ddp_batch = "tiny", 2
            args.bert_batch, args.bert_set = 2, [("seq_len", 16), ("vocab_size", 512)]
            args.warmup, args.steps, args.repeats, args.host_steps = 1, 1, 1, 1
    util = Utilization(0 if device.type == "cuda" else None)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"gpu_diagnose: {name}; torch {torch.__version__}; warm-up {args.warmup}, {args.repeats} x {args.steps} "
          f"steps per variant and round, {args.rounds} rounds", flush=True)
    out: dict[str, Any] = {"device": name, "torch": torch.__version__, "warmup": args.warmup, "steps": args.steps,
                           "repeats": args.repeats}
    for question in args.only.split(","):
        if question == "ddp":
            variants, samples = ddp_variants(device, args)
            title = f"ddp: {args.ddp_model} {args.ddp_precision} bs{args.ddp_batch}, one rank ({samples} samples/step)"
        elif question == "bert":
            variants, samples = bert_variants(device, args)
            title = f"bert: {args.bert_model} bs{args.bert_batch} ({samples} sequences/step)"
        else:
            parser.error(f"--only: unknown question {question!r} (ddp, bert)")
        out[question] = run_question(title, variants, samples, args, util, deadline)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(out, handle, indent=2)
    print(f"\ngpu_diagnose: {time.monotonic() - started:.0f} s")
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
