"""The worker: one process that trains one case and writes a JSON result.

Run as ``python -m pytest_dlperf.worker SPEC.json``.  The controller (the pytest plugin)
writes the spec (:class:`~pytest_dlperf.protocol.WorkerSpec`); the worker writes
``result-rank{RANK}.json`` (:class:`~pytest_dlperf.protocol.WorkerResult`) into the spec's
``result_dir`` and exits 0 (``ok``), 3 (``oom``) or 1 (``error``).  :mod:`pytest_dlperf.protocol`
describes both files and the progress file; ``docs/worker-result.md`` every field.

Measurement (:mod:`.windows`): ``warmup_steps`` steps, then ``repeats`` windows of ``steps`` steps, each window timed
between device synchronizations.  A window's throughput is its samples over its elapsed seconds (total over total,
never a mean of per-step rates).  A training step also marks its phases in each window
(:mod:`pytest_dlperf.worker.phaseclock`): the window's ``phases``, and the result's ``phase_timing``.

With the ``compile`` setting, the model is ``torch.compile``d and two steps run before the
warm-up (:func:`compile_steps`): the first compiles, the second is a normal step; neither
counts as warm-up or in a window, and ``timing.compile_seconds`` is the first one's time
minus the second's.

Telemetry (:mod:`pytest_dlperf.worker.telemetry`): a sampler thread runs from just before the first window to just
after the last one, on every rank, for the rank's own GPU (host metrics only on the CPU).  FLOPs
(:mod:`pytest_dlperf.worker.flops`): counted on rank 0 of a case's first run (``run_index`` 0), after the windows,
never inside the timed part; the count is the same in every run, and the controller takes it from the first.

Data (:mod:`pytest_dlperf.data`): with ``data=torchvision`` or ``dali`` every step fetches
its batch from the loader inside the windows, and the result gets a ``data`` object (the
loader's samples/s and the MB/s of image files read).  ``data_only`` times the loader
without building a model.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

from ..protocol import WorkerResult, WorkerSpec, WorkerStatus, result_file
from . import process_state
from .interference import Interference
from .lifecycle import Held, ProgressFile, launched_at, timing
from .windows import compile_steps, time_windows, warm_up


def is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _sampler(spec: WorkerSpec, device_info: dict[str, Any], warnings: list[str]):
    """The telemetry sampler of this rank (None when the spec turns it off): on CUDA the rank's own GPU (its NVML
    index, :func:`telemetry.nvml_index`; shared under ``--dlperf-share-gpus``) and the host; on the CPU the host."""
    if not spec.telemetry:
        return None
    from . import telemetry

    indices: list[int | str] = []
    if device_info["type"] == "cuda":
        try:
            indices = [telemetry.nvml_index(device_info["index"])]
        except ValueError as exc:
            warnings.append(f"GPU telemetry off: {exc}")
    return telemetry.Telemetry(indices)


def count_flops(model_spec, settings: dict[str, Any], precision: str, device_info: dict[str, Any],
                windows: list[dict[str, Any]], world_size: int,
                peak_override: float | None) -> dict[str, Any]:
    """FLOPs per sample, achieved TFLOP/s at the median window, the device peak and MFU.

    ``windows`` are the run's global windows: the throughput of all ``world_size`` devices.
    """
    import statistics

    from . import flops

    count = flops.count_training_flops(model_spec, settings)
    median = statistics.median(w["throughput"] for w in windows)
    achieved = flops.achieved_tflops(count.per_sample, median)
    name = device_info.get("name") if device_info.get("type") == "cuda" else None
    peak = flops.peak_tflops(name, precision, peak_override)
    return {"flops_per_sample": count.per_sample, "tflops": achieved, "peak_tflops": peak,
            "mfu": flops.mfu(achieved, peak, devices=world_size)}


def _input_source(spec: WorkerSpec, settings: dict[str, Any], batch_size: int, device, ranks):
    """The case's data source (:mod:`pytest_dlperf.data`), or None for synthetic data."""
    from .. import data

    backend = data.backend_of(settings)
    if backend == data.SYNTHETIC:
        if spec.data_only:
            raise data.DataError("data_only: this case's data is synthetic; data-only mode times a data loader "
                                 "(data=torchvision or data=dali)")
        return None
    return data.make_source(backend, spec.data_dir, settings, batch_size, device, rank=ranks.rank,
                            world_size=ranks.world_size, workers=spec.data_workers)


def _nvml_index(device_info: dict[str, Any]) -> int | None:
    """The NVML index of this rank's GPU, for :class:`Interference`; None on the CPU or without NVML's index."""
    if device_info.get("type") != "cuda":
        return None
    try:
        from . import telemetry

        return telemetry.nvml_index(device_info["index"])
    except Exception:  # noqa: BLE001 - no index: other processes on the GPU are not looked for
        return None


def run(spec: WorkerSpec, result: WorkerResult) -> None:
    """Build and train the case described by ``spec``; fill ``result`` as it goes."""
    if spec.convergence is not None:  # a convergence case: train to a target (worker/convergence.py)
        from .convergence import run as converge

        return converge(spec, result)
    from .distributed import ProcessGroup, choose_backend
    from .prepare import prepare

    ranks, model_spec, settings, device, device_info = prepare(spec, result)
    per_rank = model_spec.samples_per_batch(spec.case.batch_size, settings)
    result.samples_per_step = per_rank * ranks.world_size
    backend = choose_backend(device.type, spec.dist_backend, spec.share_gpus)
    group = ProcessGroup(ranks, device, backend=backend) if (ranks.distributed or spec.distributed) else None
    with Held(group, _sampler(spec, device_info, result.warnings)) as held:
        launched, marks, compiled = _measure(spec, result, held, model_spec, settings, device, device_info, ranks,
                                             per_rank)
        process_state.record(spec.result_dir, ranks.rank)  # what of the process a start could change
    result.timing = timing(launched, marks, result.windows, total=marks["measured_done"],
                           **{k: marks[k] for k in ("host_seconds_per_step",) if k in marks})
    if compiled is not None:
        result.timing.update(setup_seconds=compiled["started"] - launched, compile_seconds=compiled["compile_seconds"],
                             compile_steps_seconds=compiled["compile_steps_seconds"])
    loss = float(held.last_loss) if held.last_loss is not None else None
    if loss is not None and not math.isfinite(loss):
        result.warnings.append(f"the training loss is {loss} at the end: the step may be skipping work")
        loss = None
    result.final_loss = loss
    if ranks.rank == 0 and not (spec.data_only or spec.profile) and spec.run_index == 0:  # the first run's count
        try:
            result.flops = count_flops(model_spec, settings, spec.case.precision, device_info, result.windows,
                                       ranks.world_size, spec.peak_tflops)
        except Exception as exc:  # noqa: BLE001 - a count that fails costs the figure, not the case
            result.warnings.append(f"FLOPs not counted: {type(exc).__name__}: {str(exc).strip()[:300]}")
    result.status = WorkerStatus.OK


def _measure(spec: WorkerSpec, result: WorkerResult, held: Held, model_spec, settings: dict[str, Any], device,
             device_info: dict[str, Any], ranks, per_rank: int) -> tuple[float, dict[str, float], dict | None]:
    """The run's data source, step, warm-up and windows (their figures, the ranks' and the loader's in ``result``):
    (when it was launched, its time marks, its compile steps' timing or None)."""
    from .. import data
    from .training import TrainingStep

    if spec.max_memory:
        from .memory import apply_cap

        result.memory_cap = apply_cap(int(spec.max_memory), device)
    held.source = source = _input_source(spec, settings, spec.case.batch_size, device, ranks)
    meter = data.WindowMeter(source, then=held.sampler) if source is not None else held.sampler
    # No memory probe under a CPU memory cap: its 64 MiB would come out of what the case may use.
    busy = Interference(then=meter, gpu_index=_nvml_index(device_info),
                        probe=not (spec.max_memory and device_info.get("type") == "cpu"))
    if spec.data_only:
        held.step = data.DataOnlyStep(source, device)
    else:
        held.step = TrainingStep(model_spec, spec.case, settings, device,
                                 wrap=held.group.wrap if held.group else None, source=source)
    launched = launched_at(spec)
    progress = ProgressFile(spec.progress_path if ranks.rank == 0 else None, spec.warmup_steps, spec.repeats,
                            spec.steps, result.samples_per_step)
    compiled = None
    if settings["compile"]:
        progress(phase="compiling")
        compiled = compile_steps(held.step, lambda seconds: progress(seconds, spec.total_steps))
    if spec.profile:  # a run beside the timed ones, under torch.profiler (worker/profiling.py): never counted
        from .profiling import STEPS, profile_steps

        warm = functools.partial(warm_up, held.step, spec.warmup_steps, STEPS + 1, progress) if spec.warmup_steps \
            else lambda: None  # the progress file tells the controller the step time, for its time limit
        windows, marks, profiled = profile_steps(held.step, warm, samples_per_step=per_rank, folder=spec.result_dir,
                                                 rank=ranks.rank)
        result.profile = profiled.to_dict()
    else:
        windows, marks = time_windows(held.step, warmup_steps=spec.warmup_steps, steps=spec.steps,
                                      repeats=spec.repeats, samples_per_step=per_rank, on_progress=progress,
                                      barrier=held.group.barrier if held.group else None, sampler=busy,
                                      between=busy.between)
        result.interference = busy.summary()
        if getattr(held.step, "clock", None) is not None:
            result.phase_timing = held.step.clock.timing().to_dict()
    if device_info.get("type") == "cuda" and not spec.data_only:  # after the windows: the host's part of a step
        marks["host_seconds_per_step"] = held.step.host_seconds()
    _gather(spec, result, held, meter, windows, device_info, ranks)
    return launched, marks, compiled


def _gather(spec: WorkerSpec, result: WorkerResult, held: Held, meter, windows: list[dict[str, Any]],
            device_info: dict[str, Any], ranks) -> None:
    """This rank's windows, loader figures and telemetry; with several ranks, every rank's on rank 0 and the
    job's windows (all ranks' samples over the slowest's seconds)."""
    from .. import data
    from .distributed import global_windows, rank_identity

    source, sampler, group = held.source, held.sampler, held.group
    mine: dict[str, Any] = {"windows": windows}
    if source is not None:
        mine["data"] = meter.rank_figures(windows)
    if sampler is not None:
        result.telemetry = mine["telemetry"] = sampler.summary()
    if group is not None:
        gathered = group.gather({**rank_identity(ranks, device_info), **mine})
        result.ranks = gathered
        result.windows = global_windows([g["windows"] for g in gathered], ranks.world_size)
    else:
        result.windows = windows
    if source is not None:
        per_rank = [g["data"] for g in result.ranks] if group is not None else [mine["data"]]
        result.data = data.figures(source, "data-only" if spec.data_only else "training", per_rank, result.windows)


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """The versions every result carries (torch, torchvision, CUDA): read once per process, or once in the fork
    server for all its workers (the packages' metadata, a search of the installed distributions)."""
    from ..environment import dist_version

    out = {name: dist_version(name) for name in ("torch", "torchvision")}
    try:
        import torch

        out["cuda"] = torch.version.cuda
    except ImportError:  # pragma: no cover
        out["cuda"] = None
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m pytest_dlperf.worker SPEC.json", file=sys.stderr)
        return 2
    spec = WorkerSpec.from_dict(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    from .distributed import ranks_from_env
    from .watchdog import watch_parent

    watch_parent()
    ranks = ranks_from_env()
    result = WorkerResult.started(spec, ranks.rank, ranks.world_size)
    try:
        run(spec, result)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a result
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        traceback.print_exc()
        oom = False
        try:
            oom = is_oom(exc)
        except ImportError:
            pass
        if result.memory_cap is not None:
            from .memory import is_cap_failure

            oom = oom or is_cap_failure(exc)
        result.status = WorkerStatus.OOM if oom else WorkerStatus.ERROR
        result.error = {"type": type(exc).__name__, "message": str(exc).strip()[:4000],
                        "traceback": traceback.format_exc()[-8000:]}
    result.versions = dict(versions())
    from .. import jsonio

    jsonio.dump(Path(spec.result_dir) / result_file(ranks.rank), result.to_dict(), "result")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
