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
from .launchers import failed_rank_from_agent, get_launcher, rank_stderr
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
    launcher: str = "local"

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

    def ranks(self) -> list[dict[str, Any]]:
        """Per rank over all runs: host, device and the median of its own windows."""
        by_rank: dict[int, dict[str, Any]] = {}
        for run in self.runs:
            for rank in run["ranks"]:
                entry = by_rank.setdefault(rank["rank"], {"rank": rank["rank"], "host": rank["host"],
                                                          "device": rank["device"], "figures": []})
                entry["figures"].extend(w["throughput"] for w in rank["windows"])
        return [{"rank": r["rank"], "host": r["host"], "device": r["device"],
                 "throughput": summarize(r["figures"]).median} for _, r in sorted(by_rank.items())]

    def straggler(self, threshold: float = 0.10) -> str | None:
        """A note when the slowest rank is more than ``threshold`` below the median rank."""
        ranks = self.ranks()
        if len(ranks) < 2:
            return None
        slowest = min(ranks, key=lambda r: r["throughput"])
        typical = summarize([r["throughput"] for r in ranks]).median
        if slowest["throughput"] >= typical * (1 - threshold):
            return None
        return (f"straggler: rank {slowest['rank']} on {slowest['host']} ran at {slowest['throughput']:.1f} "
                f"{self.unit}, {100 * (1 - slowest['throughput'] / typical):.0f}% below the median rank")


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
        "ranks": [_rank_summary(r) for r in result.get("ranks", [])],
    }


def _rank_summary(rank: dict[str, Any]) -> dict[str, Any]:
    figures = [w["throughput"] for w in rank["windows"]]
    return {"rank": rank["rank"], "host": rank["host"], "device": rank["device"].get("name"),
            "throughput": summarize(figures).median if figures else None, "windows": rank["windows"]}


def _tail(path, lines: int = launch.STDERR_TAIL_LINES) -> str:
    from collections import deque

    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except (OSError, TypeError):
        return ""


def _tail_block(path) -> str:
    tail = _tail(path)
    return f"\n--- last lines of the worker's stderr ({path}) ---\n{tail}" if tail else ""


def failure_message(case: Case, outcome: launch.WorkerOutcome) -> tuple[str, str]:
    """(kind, message) for a run that produced no measurement.

    For several ranks it names the rank that failed first: one whose result says so, or
    the root cause torchrun's agent reports, with that rank's own stderr.
    """
    results = outcome.rank_results
    failed = next((r for r in sorted(results) if results[r]["status"] != "ok"), None)
    who, stderr = "the worker", outcome.stderr_path
    if case.gpus > 1 or len(results) > 1:
        agent = failed_rank_from_agent(_tail(outcome.stderr_path, 200)) if failed is None else None
        rank = failed if failed is not None else (agent[0] if agent else None)
        if rank is not None:
            who = f"rank {rank}" + (f" (exit status {agent[1]})" if agent else "")
            stderr = rank_stderr(outcome.run_dir, rank) or stderr
    result = results.get(failed) if failed is not None else outcome.result
    if outcome.timed_out:
        return "timeout", (f"{case.id}: timed out after {outcome.time_limit:.0f} s; the worker's "
                           f"process group was killed (--dlperf-timeout){_tail_block(outcome.stderr_path)}")
    if result is not None and result["status"] == "oom":
        device = result.get("device", {})
        where = device.get("name") or device.get("type", "the device")
        if device.get("type") == "cuda" and device.get("index") is not None:
            where = f"cuda:{device['index']} ({where})"
        on_rank = f" (rank {failed})" if who.startswith("rank") else ""
        return "oom", (f"{case.id}: out of memory at batch size {case.batch_size} on {where}{on_rank}: "
                       f"{result['error']['message'].splitlines()[0]}")
    if result is not None and result["status"] == "error":
        err = result["error"]
        return "error", f"{case.id}: {who} failed: {err['type']}: {err['message']}{_tail_block(stderr)}"
    why = outcome.result_error or "wrote no result"
    if who.startswith("rank"):
        return "crash", f"{case.id}: {who} died; the job ended with {launch.describe_returncode(outcome.returncode)}" \
                        f"{_tail_block(stderr)}"
    return "crash", (f"{case.id}: the worker ended with {launch.describe_returncode(outcome.returncode)} "
                     f"and {why}{_tail_block(stderr)}")


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
    launcher = get_launcher(params.launcher)
    runs: list[dict[str, Any]] = []
    for index in range(params.runs):
        run_dir = workdir / f"run{index}"
        how = launcher.launch(case.gpus, params.device, run_dir)
        outcome = launch.run_worker(dict(worker_spec, distributed=how.distributed), run_dir,
                                    timeout=params.timeout, startup_timeout=params.startup_timeout,
                                    command=how.command, extra_env=how.env)
        record = _run_record(index, outcome)
        runs.append(record)
        if outcome.result is None or outcome.result["status"] != "ok" or outcome.returncode != 0:
            kind, message = failure_message(case, outcome)
            raise CaseError(message, kind, runs)
    windows = [w["throughput"] for run in runs for w in run["windows"]]
    first = runs[0]
    warnings = sorted({w for run in runs for w in run["warnings"]})
    return Attempt(summarize(windows), spec.unit, runs, first["device"] or {}, warnings)
