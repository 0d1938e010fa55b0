"""The records of a case's runs: one :class:`RunRecord` per fresh run, the runs of a case as an :class:`Attempt`.

A run is built once, where it ended: a worker's from its rank 0 result
(:func:`pytest_dlperf.launch.workers.run_record`), a command's from its log
(:func:`pytest_dlperf.commands.measure.run_record`); both are this one record, so nothing reads a run
of one kind differently.  Its figure is the median of its windows (:attr:`RunRecord.median`); the
case's windows are pooled only for their statistics (:class:`Attempt`).  A results document keeps
them as its cases' ``attempts[].runs[]`` (:meth:`RunRecord.to_dict`, the only place that knows its keys).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..cases import compile_label
from ..gate.stats import Summary, summarize
from ..protocol import ValueEnum


class RunStatus(ValueEnum):
    """How a run ended: its worker's status (``ok``, ``oom``, ``error``), or without a result."""

    OK = "ok"
    OOM = "oom"
    ERROR = "error"
    TIMEOUT = "timeout"  # killed at its time limit
    CRASHED = "crashed"  # ended without a result
    FAR_OFF = "far-off"  # cut short by the controller, far slower than its baseline allows (pytest_dlperf.gate.far)


def window_median(windows: Sequence[Mapping[str, Any]]) -> float | None:
    """The median throughput of ``windows`` (None without any): a run's, or a rank's, figure."""
    figures = [w["throughput"] for w in windows if w.get("throughput") is not None]
    return float(statistics.median(figures)) if figures else None


@dataclasses.dataclass
class RankRecord:
    """One rank of a run of several: its host, device and its own windows."""

    rank: int
    host: str | None
    device: str | None  # the device's name
    windows: list[dict[str, Any]]
    telemetry: dict[str, Any] | None = None
    data: dict[str, Any] | None = None

    @property
    def median(self) -> float | None:
        return window_median(self.windows)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "device": self.device, "throughput": self.median,
                "windows": self.windows, "telemetry": self.telemetry, "data": self.data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankRecord:
        return cls(data["rank"], data.get("host"), data.get("device"), list(data.get("windows") or []),
                   data.get("telemetry"), data.get("data"))


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """What a command case's run ran (docs/commands.md): its arguments, folder, environment, parser and
    method (``windows``: logged steps; ``final``: the script's own final figure; ``time_to_train``), and the
    logged steps after which it was stopped once measured (docs/commands.md)."""

    argv: tuple[str, ...]
    cwd: str | None
    env: Mapping[str, str]
    parser: str
    method: str
    #: The logged steps its log had when the plugin stopped it (it would have trained on); None: it ended by itself.
    stopped_after: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "cwd": self.cwd, "env": dict(self.env), "parser": self.parser,
                "method": self.method, "stopped_after": self.stopped_after}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommandLine:
        return cls(tuple(data["argv"]), data.get("cwd"), dict(data.get("env") or {}), data["parser"], data["method"],
                   data.get("stopped_after"))


@dataclasses.dataclass
class RunRecord:
    """One fresh run of a case: how it ended, its windows and what its rank 0 reported."""

    index: int
    status: RunStatus
    returncode: int | None = None
    wall_seconds: float = 0.0
    log_dir: str | None = None
    device: dict[str, Any] | None = None
    windows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    timing: dict[str, float] = dataclasses.field(default_factory=dict)
    final_loss: float | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    settings: dict[str, Any] | None = None
    memory_cap: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    flops: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    convergence: dict[str, Any] | None = None  # a run that trains to a target: pytest_dlperf.convergence.figures
    interference: dict[str, Any] | None = None  # what else used the machine during its windows
    ranks: list[RankRecord] = dataclasses.field(default_factory=list)
    command: CommandLine | None = None  # a command case's run
    #: How its worker's process started: "forked" from the fork server or "fresh" (None: a command, or an older
    #: results file); where the host sets the pace of a step the two may measure apart (docs/gpu.md).
    start: str | None = None
    #: Cut short far off its baseline: its pace, steps and seconds (:class:`pytest_dlperf.gate.far.Cut`'s fields)
    far_off: dict[str, Any] | None = None
    #: A --dlperf-profile run's top operators (:class:`pytest_dlperf.worker.operators.Profile`'s fields); never counted
    profile: dict[str, Any] | None = None
    #: The host's speed read by the controller's own probe process after the run ended (worker.hostprobe): its
    #: memory_gbs, core_gflops and their index; None where not probed.
    host_probe: dict[str, Any] | None = None

    @property
    def median(self) -> float | None:
        """The run's figure: the median of its windows (None without any)."""
        return window_median(self.windows)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    def to_dict(self) -> dict[str, Any]:
        out = {"index": self.index, "returncode": self.returncode, "status": self.status.value,
               "wall_seconds": self.wall_seconds, "log_dir": self.log_dir, "device": self.device,
               "windows": self.windows, "timing": self.timing, "final_loss": self.final_loss,
               "warnings": self.warnings, "settings": self.settings, "memory_cap": self.memory_cap,
               "telemetry": self.telemetry, "flops": self.flops, "data": self.data, "convergence": self.convergence,
               "interference": self.interference, "ranks": [r.to_dict() for r in self.ranks]}
        if self.command is not None:
            out["command"] = self.command.to_dict()
        if self.start is not None:
            out["start"] = self.start
        if self.far_off is not None:
            out["far_off"] = self.far_off
        if self.profile is not None:
            out["profile"] = self.profile
        if self.host_probe is not None:
            out["host_probe"] = self.host_probe
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], position: int = 0) -> RunRecord:
        """A run of a results document (an older one may lack fields: they default; its index to ``position``)."""
        command = data.get("command")
        return cls(
            index=data.get("index", position), status=RunStatus(data.get("status") or RunStatus.OK),
            returncode=data.get("returncode"), wall_seconds=data.get("wall_seconds") or 0.0,
            log_dir=data.get("log_dir"), device=data.get("device"), windows=list(data.get("windows") or []),
            timing=dict(data.get("timing") or {}), final_loss=data.get("final_loss"),
            warnings=list(data.get("warnings") or []), settings=data.get("settings"), memory_cap=data.get("memory_cap"),
            telemetry=data.get("telemetry"), flops=data.get("flops"), data=data.get("data"),
            convergence=data.get("convergence"), interference=data.get("interference"),
            ranks=[RankRecord.from_dict(r) for r in data.get("ranks") or []],
            command=CommandLine.from_dict(command) if command else None, start=data.get("start"),
            far_off=data.get("far_off"), profile=data.get("profile"), host_probe=data.get("host_probe"))


@dataclasses.dataclass
class AttemptRecord:
    """A case's runs as its result keeps them (``attempts[]``): their pooled median (None where the runs
    ended without a figure) and statistics, and the runs."""

    throughput: float | None
    runs: list[RunRecord]
    stats: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"throughput": self.throughput}
        if self.stats is not None:
            out["stats"] = self.stats
        out["runs"] = [run.to_dict() for run in self.runs]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptRecord:
        runs = [RunRecord.from_dict(run, position) for position, run in enumerate(data.get("runs") or [])]
        return cls(data.get("throughput"), runs, data.get("stats"))


@dataclasses.dataclass
class Attempt:
    """A case's runs so far, as the controller judges them: their windows pooled, their warnings once each."""

    summary: Summary
    unit: str
    runs: list[RunRecord]
    device: dict[str, Any]
    warnings: list[str]

    @classmethod
    def from_runs(cls, runs: Sequence[RunRecord], unit: str, device: dict[str, Any] | None = None) -> Attempt:
        """The attempt of ``runs`` (in order); ``device``: the first run's where not given.  Its summary pools their
        windows; a run cut short far off its baseline (no windows) adds its pace."""
        runs = list(runs)
        values = [w["throughput"] for run in runs for w in run.windows]
        values += [run.far_off["pace"] for run in runs if run.far_off is not None]
        return cls(summarize(values), unit, runs,
                   device if device is not None else (runs[0].device or {}),
                   sorted({w for run in runs for w in run.warnings}))

    @property
    def windows(self) -> list[dict[str, Any]]:
        return [w for run in self.runs for w in run.windows]

    @property
    def compile(self) -> str | None:
        """How its runs trained: "eager" or the ``torch.compile`` mode (:func:`~pytest_dlperf.cases.compile_label`),
        "mixed" where they differ, None where no run says (a command)."""
        labels = {compile_label(r.settings) for r in self.runs if r.settings is not None}
        return labels.pop() if len(labels) == 1 else ("mixed" if labels else None)

    @property
    def start(self) -> str | None:
        """How its runs' workers started: "forked" or "fresh", "mixed" where they differ (a fork server that could
        not serve some), None where no run says (a command)."""
        starts = {run.start for run in self.runs if run.start}
        return starts.pop() if len(starts) == 1 else ("mixed" if starts else None)

    def record(self) -> AttemptRecord:
        return AttemptRecord(self.summary.median, self.runs, self.summary.to_dict())

    def flops(self, devices: int) -> dict[str, Any] | None:
        """FLOPs of the attempt: the workers' count, TFLOP/s and MFU at the pooled median."""
        from ..worker import flops

        counted = next((run.flops for run in self.runs if run.flops), None)
        if counted is None:
            return None
        achieved = flops.achieved_tflops(counted["flops_per_sample"], self.summary.median)
        return {"flops_per_sample": counted["flops_per_sample"], "tflops": achieved,
                "peak_tflops": counted["peak_tflops"], "mfu": flops.mfu(achieved, counted["peak_tflops"], devices)}

    def data(self) -> dict[str, Any] | None:
        """The loader's figures over all runs (``pytest_dlperf.data``); None for synthetic data."""
        from .. import data

        return data.pool([run.data for run in self.runs], self.summary.median)

    def telemetry(self) -> dict[str, Any] | list[dict[str, Any]] | None:
        """The first run's telemetry summary; for several ranks, one per rank (with its rank and hostname)."""
        first = self.runs[0]
        if first.ranks:
            per_rank = [{"rank": r.rank, "hostname": r.host, **r.telemetry} for r in first.ranks if r.telemetry]
            return per_rank or None
        return first.telemetry

    def ranks(self) -> list[dict[str, Any]]:
        """Per rank over all runs: host, device and the median of its own windows."""
        by_rank: dict[int, RankRecord] = {}
        for run in self.runs:
            for rank in run.ranks:
                pooled = by_rank.setdefault(rank.rank, RankRecord(rank.rank, rank.host, rank.device, []))
                pooled.windows.extend(rank.windows)
        return [{"rank": r.rank, "host": r.host, "device": r.device, "throughput": r.median}
                for _, r in sorted(by_rank.items())]

    def straggler(self, ranks: list[dict[str, Any]], threshold: float = 0.10) -> str | None:
        """A note when the slowest of ``ranks`` (:meth:`ranks`) is more than ``threshold`` below the median rank."""
        if len(ranks) < 2:
            return None
        slowest = min(ranks, key=lambda r: r["throughput"])
        typical = summarize([r["throughput"] for r in ranks]).median
        if slowest["throughput"] >= typical * (1 - threshold):
            return None
        return (f"straggler: rank {slowest['rank']} on {slowest['host']} ran at {slowest['throughput']:.1f} "
                f"{self.unit}, {100 * (1 - slowest['throughput'] / typical):.0f}% below the median rank")
