"""dlperf cases in pytest-benchmark's JSON (``--benchmark-json``, ``--benchmark-autosave``).

When pytest-benchmark is active, every measured case is added to its session's list of
benchmarks, so its JSON files, its storage and ``pytest-benchmark compare`` show the
history of a machine next to the user's own benchmarks:

- ``name`` is the case id, ``fullname`` its node id (``dlperf::resnet50-amp-bs256-gpu8``;
  what ``compare`` matches runs by), ``group`` "dlperf <model> (<unit>)", ``param`` the
  case id and ``params`` the case (model, precision, batch_size, gpus, settings);
- one round per measured window of the judged attempt (all its runs). A round's time is
  the window's seconds per sample (per image, sequence or token), ``iterations`` the
  samples of a window, so pytest-benchmark's ``ops`` (rounds / total time) is the
  throughput in the case's unit and its median time is 1 / the case's median throughput;
- ``extra_info``: throughput, unit, verdict, baseline, difference, the case's settings,
  batch size, GPUs, device, steps and samples per window, TFLOP/s and MFU;
- ``options``: the run parameters (warm-up, steps, repeats, runs, device, launcher);
- ``machine_info`` gains ``gpu`` (model), ``gpu_count``, ``gpu_driver``, ``cuda_driver``,
  ``gpu_reason`` (why there is none) and torch's ``torch``, ``cuda``, ``cudnn``, ``nccl``
  (``pytest_benchmark_update_machine_info``), so ``compare`` warns when they change.

Nothing happens when pytest-benchmark is not installed, not loaded (``-p no:benchmark``),
disabled (``--benchmark-disable``, xdist) or given none of ``--benchmark-json``,
``--benchmark-save``, ``--benchmark-autosave``, ``--benchmark-compare``. Cases that
produced no measurement (errors, skips) are left out; regressions are in, with their verdict. ``--benchmark-only`` skips dlperf cases: they are not tests that use
the ``benchmark`` fixture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from .. import environment
from ..results.case import CaseResult

PLUGIN_NAME = "dlperf-benchmark-json"


@dataclasses.dataclass
class CaseSource:
    """What pytest-benchmark's ``Metadata`` reads from the fixture that produced a benchmark."""

    name: str
    fullname: str
    group: str
    param: str
    params: dict[str, Any]
    extra_info: dict[str, Any]
    cprofile_stats: None = None
    has_error: bool = False


def active_session(config: pytest.Config) -> Any | None:
    """pytest-benchmark's session when it is loaded, enabled and asked to write or compare runs.

    Without ``--benchmark-json``, ``--benchmark-save``, ``--benchmark-autosave`` or
    ``--benchmark-compare`` the cases stay out: pytest-benchmark would only print a second
    table of what the dlperf summary already shows.
    """
    # pytest-benchmark keeps its session only as this attribute; it offers no public accessor.
    session = getattr(config, "_benchmarksession", None)
    if session is None or session.disabled:
        return None
    if not (session.json or session.save or session.autosave or session.compare):
        return None
    return session


def windows(result: CaseResult) -> list[dict[str, Any]]:
    """The measured windows of the attempt the case was judged on (the last), over all its runs."""
    if not result.attempts:
        return []
    return [w for run in result.attempts[-1].runs for w in run.windows if w.get("samples")]


def extra_info(result: CaseResult, measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The case's figures and settings that pytest-benchmark has no column for."""
    case = result.case
    flops = result.flops or {}
    return {
        "dlperf": True,
        "throughput": result.throughput, "unit": result.unit,
        "verdict": None if result.verdict is None else result.verdict.value, "message": result.message,
        "baseline": None if result.baseline is None else result.baseline.to_dict(),
        "difference": result.difference, "hardware_mismatch": result.hardware_mismatch,
        "model": case.model, "precision": case.precision, "batch_size": case.batch_size,
        "gpus": case.gpus, "settings": case.settings_dict,
        "device": result.device,
        "steps_per_window": measured[0]["steps"], "samples_per_window": measured[0]["samples"],
        "cv": (result.stats or {}).get("cv"),
        "tflops": flops.get("tflops"), "mfu": flops.get("mfu"),
    }


def to_benchmark(result: CaseResult, options: dict[str, Any]) -> Any | None:
    """A pytest-benchmark ``Metadata`` for a measured case; None when it has no windows."""
    from pytest_benchmark.stats import Metadata

    measured = windows(result)
    if not result.measured or not measured:
        return None
    source = CaseSource(name=result.id, fullname=result.nodeid or result.id,
                        group=f"dlperf {result.case.model} ({result.unit})", param=result.id,
                        params=result.case.to_dict(), extra_info=extra_info(result, measured))
    bench = Metadata(source, iterations=measured[0]["samples"], options=options)
    for window in measured:
        bench.stats.update(window["seconds"] / window["samples"])
    return bench


def add_case(config: pytest.Config, result: CaseResult) -> None:
    """Add a judged case to pytest-benchmark's session (its JSON and storage), when it is active."""
    session = active_session(config)
    if session is None:
        return
    options = {"timer": "perf_counter between device synchronizations", **(result.parameters or {})}
    bench = to_benchmark(result, options)
    if bench is not None:
        session.benchmarks.append(bench)


def gpu_machine_info(env: dict[str, Any]) -> dict[str, Any]:
    """GPU, driver and CUDA library facts for pytest-benchmark's ``machine_info``."""
    gpus = env.get("gpus") or {}
    versions = env.get("versions") or {}
    return {
        "gpu": gpus.get("model"), "gpu_count": gpus.get("count", 0),
        "gpu_driver": gpus.get("driver"), "cuda_driver": gpus.get("cuda_driver"),
        "gpu_reason": gpus.get("reason"),
        "torch": versions.get("torch"), "cuda": versions.get("cuda"),
        "cudnn": versions.get("cudnn"), "nccl": versions.get("nccl"),
    }


class MachineInfo:
    """The ``pytest_benchmark_update_machine_info`` hook, registered for sessions that run dlperf cases."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        machine_info.update(gpu_machine_info(environment.collect(config.rootpath)))


def register(config: pytest.Config) -> None:
    """Hook into pytest-benchmark when it is loaded (a no-op under ``-p no:benchmark``)."""
    if config.pluginmanager.hasplugin("benchmark") and not config.pluginmanager.hasplugin(PLUGIN_NAME):
        config.pluginmanager.register(MachineInfo(), PLUGIN_NAME)
