"""Measuring a case: ``runs`` fresh worker processes, their windows pooled, one median.

The seeds' method is "skip 20 steps, average 100, run 5-7 times, take the median": here
each run is a fresh process (warm-up, then ``repeats`` windows of ``steps`` steps) and the
case's figure is the median of all windows of all runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from . import launch
from .cases import Case
from .models import ModelSpec
from .stats import Summary, summarize


@dataclasses.dataclass(frozen=True)
class RunParams:
    device: str  # "cuda" or "cpu", resolved
    warmup_steps: int = 20
    steps: int = 100
    repeats: int = 5
    runs: int = 1
    timeout: float | None = None
    startup_timeout: float = 300.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class CaseError(Exception):
    """A run that produced no measurement: crash, out of memory, timeout."""

    def __init__(self, message: str, kind: str, runs: list[dict[str, Any]]):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.runs = runs


@dataclasses.dataclass
class Attempt:
    summary: Summary
    unit: str
    runs: list[dict[str, Any]]
    device: dict[str, Any]
    warnings: list[str]

    @property
    def windows(self) -> list[dict[str, Any]]:
        return [w for run in self.runs for w in run["windows"]]

    def to_dict(self) -> dict[str, Any]:
        return {"throughput": self.summary.median, "stats": self.summary.to_dict(), "runs": self.runs}


def _run_record(index: int, outcome: launch.WorkerOutcome) -> dict[str, Any]:
    result = outcome.result or {}
    return {
        "index": index,
        "returncode": outcome.returncode,
        "status": result.get("status", "timeout" if outcome.timed_out else "crashed"),
        "wall_seconds": round(outcome.wall_seconds, 3),
        "log_dir": str(outcome.run_dir),
        "device": result.get("device"),
        "windows": result.get("windows", []),
        "timing": result.get("timing", {}),
        "final_loss": result.get("final_loss"),
        "warnings": result.get("warnings", []),
        "settings": result.get("settings"),
    }


def failure_message(case: Case, outcome: launch.WorkerOutcome) -> tuple[str, str]:
    """(kind, message) for a run that produced no measurement."""
    result = outcome.result
    tail = outcome.stderr_tail()
    tail_block = f"\n--- last lines of the worker's stderr ({outcome.stderr_path}) ---\n{tail}" if tail else ""
    if outcome.timed_out:
        return "timeout", (f"{case.id}: timed out after {outcome.time_limit:.0f} s; the worker's "
                           f"process group was killed (--dlperf-timeout){tail_block}")
    if result is not None and result["status"] == "oom":
        device = result.get("device", {})
        where = device.get("name") or device.get("type", "the device")
        if device.get("type") == "cuda" and device.get("index") is not None:
            where = f"cuda:{device['index']} ({where})"
        return "oom", (f"{case.id}: out of memory at batch size {case.batch_size} on {where}: "
                       f"{result['error']['message'].splitlines()[0]}")
    if result is not None and result["status"] == "error":
        err = result["error"]
        return "error", f"{case.id}: the worker failed: {err['type']}: {err['message']}{tail_block}"
    why = outcome.result_error or "wrote no result"
    return "crash", (f"{case.id}: the worker ended with {launch.describe_returncode(outcome.returncode)} "
                     f"and {why}{tail_block}")


def measure(case: Case, spec: ModelSpec, params: RunParams, workdir: Path) -> Attempt:
    """Run ``params.runs`` fresh workers for ``case``; raise :class:`CaseError` if one fails."""
    worker_spec = {
        "case": case.to_dict(),
        "device": params.device,
        "warmup_steps": params.warmup_steps,
        "steps": params.steps,
        "repeats": params.repeats,
        "model_source": {"file": spec.source, "module": spec.module},
    }
    runs: list[dict[str, Any]] = []
    for index in range(params.runs):
        outcome = launch.run_worker(worker_spec, workdir / f"run{index}", timeout=params.timeout,
                                    startup_timeout=params.startup_timeout)
        record = _run_record(index, outcome)
        runs.append(record)
        if outcome.result is None or outcome.result["status"] != "ok" or outcome.returncode != 0:
            kind, message = failure_message(case, outcome)
            raise CaseError(message, kind, runs)
    windows = [w["throughput"] for run in runs for w in run["windows"]]
    first = runs[0]
    warnings = sorted({w for run in runs for w in run["warnings"]})
    return Attempt(summarize(windows), spec.unit, runs, first["device"] or {}, warnings)
