"""Baseline files: expected throughput per case, with provenance.

Format (schema ``schemas/baseline.schema.json``, version 1)::

    {
      "schema_version": 1,
      "kind": "dlperf-baseline",
      "hardware": {"gpu": "Tesla V100-SXM2-16GB", "gpus_per_node": 8, "nodes": 1},
      "provenance": {"source": "NVIDIA DeepLearningExamples ...", "date": "2021-03",
                     "software": {"container": "pytorch 21.03"}},
      "defaults": {"tolerance": 0.05, "warmup_steps": 20, "steps": 100, "repeats": 5},
      "cases": [
        {"model": "resnet50", "precision": "amp", "batch_size": 256, "gpus": 8,
         "throughput": 8322, "unit": "img/s", "source": "README table"}
      ]
    }
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from .. import jsonio
from ..cases import Case
from ..gate.figures import HOST_PROBES
from ..results.case import Expected
from . import hardware

DEFAULT_TOLERANCE = 0.05
STEP_FIELDS = ("warmup_steps", "steps", "repeats")
# The step counts where neither the command line nor the baseline gives any (README: Options).
STEP_DEFAULTS = {"warmup_steps": 20, "steps": 100, "repeats": 5}
#: An entry's host probes (the median of its counted runs' memory_gbs and core_gflops): what the verdict
#: compares a later session's probes with, to name a host that reads far from it (:mod:`pytest_dlperf.gate.figures`).
PROBE_FIELDS = tuple(probe.key for probe in HOST_PROBES)
#: Entry fields that make a baseline schema version 2.
VERSION_2_FIELDS = ("runs", *PROBE_FIELDS, "probe_runs", "command", "cpu_threads", "start", "host_cpu", "compile",
                    "phases", "profile", "host_runs")


@dataclasses.dataclass(frozen=True)
class Entry:
    case: Case
    throughput: float | None  # None for a convergence case (its figure is time_to_target)
    unit: str | None
    tolerance: float | None  # None: the file gives none, the session's default applies
    source: str | None
    overrides: Mapping[str, int]  # warmup_steps / steps / repeats for this case
    index: int  # position in the file's "cases", for error messages
    min_scaling_efficiency: float | None = None
    min_gpu_utilization: float | None = None  # least mean GPU utilization, as a fraction
    # Why this case runs unjudged (a folder with no figure for this machine: :mod:`.machines`).
    unjudged: str | None = None
    file: str | None = None  # the file the entry comes from, where it is not the baseline's own path
    command: Mapping[str, Any] | None = None  # a command case's command object (schema_version 2)
    #: (file, index) of the entry the command is read from, where it is not this one's: a folder's reference file
    #: that gives the same command as this figure's file (:mod:`.machines`), whose trust it runs under.
    command_source: tuple[str, int] | None = None
    # A convergence case (schema version 2): its budget, seeds and the baseline's median seconds to target.
    budget: Mapping[str, float] | None = None
    seeds: int | None = None
    time_to_target: float | None = None
    runs: tuple[float, ...] = ()  # the medians of the runs the figure came from (schema version 2), for its spread
    memory_gbs: float | None = None  # the memory bandwidth its runs' probe measured (version 2): their median
    core_gflops: float | None = None  # the core speed its runs' core probe measured (version 2), likewise
    #: Each counted run's probe readings, by probe key (version 2): the probes' own spread on that host.
    probe_runs: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    #: The intra-op threads per CPU rank its figure was measured with (version 2; :mod:`pytest_dlperf.launch.threads`).
    cpu_threads: int | None = None
    #: An entry of a CPU baseline saved before ``cpu_threads`` was recorded: it runs as those versions ran it.
    threads_as_before: bool = False
    #: How its runs' workers started, "forked" or "fresh" (version 2; None: not recorded).
    start: str | None = None
    #: The host's CPU model of an entry that was host-bound when saved (version 2; :mod:`pytest_dlperf.results.host_bound`).
    host_cpu: str | None = None
    #: How a GPU case's runs trained: "eager" or the ``torch.compile`` mode (version 2; None: not recorded).
    compile: str | None = None
    #: Seconds per step of each phase its runs measured (version 2; :mod:`pytest_dlperf.gate.attribution`).
    phases: Mapping[str, float] | None = None
    #: Its top operators when saved with ``--dlperf-profile`` (version 2; :mod:`pytest_dlperf.worker.operators`).
    profile: Mapping[str, Any] | None = None
    #: The controller's probe of the host after each counted run (version 2; :mod:`pytest_dlperf.gate.host`).
    host_runs: tuple[float, ...] = ()

    def expected(self, unit: str, default_tolerance: float = DEFAULT_TOLERANCE) -> Expected:
        tolerance = self.tolerance if self.tolerance is not None else default_tolerance
        return Expected(self.throughput, self.unit or unit, tolerance, self.source, memory_gbs=self.memory_gbs,
                        core_gflops=self.core_gflops, phases=self.phases, host_runs=self.host_runs or None)


@dataclasses.dataclass
class Baseline:
    path: str
    data: dict[str, Any]
    entries: list[Entry]
    selection: Any = None  # picked from a folder for this machine: a baseline.machines.Selection

    @property
    def commands(self) -> dict[str, Mapping[str, Any]]:
        """The command objects its entries give, by model name (a baseline saved from its cases keeps them)."""
        return {e.case.model: e.command for e in self.entries if e.command}

    def command_givers(self) -> list[tuple[str, Mapping[str, Any], str, int]]:
        """``(model, command object, file, index)`` of each entry that gives a command: where it is read from."""
        return [(e.case.model, e.command, *(e.command_source or (e.file or self.path, e.index)))
                for e in self.entries if e.command is not None]

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.data.get("defaults", {})

    @property
    def step_defaults(self) -> dict[str, int]:
        """The step counts its ``defaults`` give, as integers (JSON Schema's ``integer`` takes ``20.0``)."""
        return {k: int(v) for k, v in self.defaults.items() if k in STEP_FIELDS}

    @property
    def source(self) -> str | None:
        return jsonio.one_line(self.data.get("provenance", {}).get("source"))

    @property
    def hardware(self) -> Mapping[str, Any]:
        return self.data.get("hardware", {})

    @property
    def measured_on(self) -> tuple[str, str | None] | None:
        """The device the figures were measured on (see :func:`measured_on`)."""
        return measured_on(self.hardware, self.data.get("environment") or {})

    @property
    def cpu_isa(self) -> str | None:
        """The instruction set of the CPU the figures were measured on (``hardware.cpu_isa``, else the recorded
        environment's), where known."""
        return self.hardware.get("cpu_isa") or ((self.data.get("environment") or {}).get("host") or {}).get("cpu_isa")

    def device_mismatch(self, device: Mapping[str, Any], isa: str | None = None) -> str | None:
        """The note for a case that ran on ``device`` (with this machine's CPU ``isa``) when it is not this
        baseline's (see :func:`device_mismatch`)."""
        return device_mismatch(self.measured_on, device, self.cpu_isa, isa)

    def reference(self, case: Case) -> Entry | None:
        """The 1-GPU entry of the same model, precision, batch and settings (one with a figure to judge by)."""
        for entry in self.entries:
            if entry.case.gpus == 1 and entry.case.same_config(case) and entry.unjudged is None:
                return entry
        return None

    def find(self, case: Case) -> Entry | None:
        for entry in self.entries:
            if entry.case == case:
                return entry
        return None


def measured_on(hardware: Mapping[str, Any], environment: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(device type, model) of a baseline's machine: ("cuda", its GPU) or ("cpu", its CPU).

    The GPU is ``hardware.gpu``, else the recorded ``environment.gpus.model``; a baseline
    whose ``hardware.device`` is "cpu" was measured on the CPU, whatever GPUs the host had.
    None when the baseline does not say.
    """
    if hardware.get("device") == "cpu":
        return "cpu", hardware.get("cpu") or (environment.get("host") or {}).get("cpu")
    gpu = hardware.get("gpu") or (environment.get("gpus") or {}).get("model")
    if gpu or hardware.get("device") == "cuda":
        return "cuda", gpu
    return None


def device_mismatch(baseline_device: tuple[str, str | None] | None, device: Mapping[str, Any],
                    baseline_isa: str | None = None, isa: str | None = None) -> str | None:
    """A note when this run's ``device`` (the worker's ``{"type", "name"}``) is not the baseline's.

    Different GPU models (compared by :func:`.hardware.same_gpu_model`), different CPU
    models on a CPU run (:func:`.hardware.same_cpu_model`) or the same name with another
    instruction set (``baseline_isa``, ``isa``: :func:`environment.cpu_isa`, where both are
    known), or a CPU run against a GPU baseline (and the reverse). None when they match or
    either side is unknown.
    """
    if baseline_device is None or not device.get("type"):
        return None
    kind, model = baseline_device
    name = device.get("name")
    if kind == device["type"]:
        same = hardware.same_cpu_model if kind == "cpu" else hardware.same_gpu_model
        if kind == "cpu" and model and name and same(model, name) and baseline_isa and isa \
                and set(baseline_isa.split()) != set(isa.split()):
            return f"baseline measured on {model} ({baseline_isa}); this machine has {name} ({isa})"
        if not (model and name) or same(model, name):
            return None
        return f"baseline measured on {model}; this machine has {name}"
    if device["type"] == "cpu":
        return f"baseline measured on {model or 'a GPU'}; this run is on the CPU ({name or 'unknown model'})"
    return f"baseline measured on the CPU ({model or 'unknown model'}); this run is on {name or 'a GPU'}"


def host_cpu_mismatch(saved_cpu: str | None, cpu: str | None) -> str | None:
    """The note of a case whose entry was host-bound when saved on a host with ``saved_cpu`` (its ``host_cpu``:
    :mod:`pytest_dlperf.results.host_bound`), gated on one with another CPU model ``cpu``; None where they match or
    either is unknown."""
    if not saved_cpu or not cpu or hardware.same_cpu_model(saved_cpu, cpu):
        return None
    return (f"baseline measured host-bound on a host with {saved_cpu}; this host has {cpu}: a host-bound figure "
            f"depends on the host's CPU")


def start_mismatch(saved: str | None, start: str | None) -> str | None:
    """The note of a case whose entry was measured with workers started ``saved`` ("forked", "fresh": its
    ``start``) and whose runs started ``start``; None where they match or either is unknown."""
    if not saved or not start or saved == start:
        return None
    return (f"baseline measured with workers started {saved}; these runs' started {start} (dlperf_start): where "
            f"the host sets a step's pace the two may read apart (docs/gpu.md)")


def compile_mismatch(saved: str | None, compiled: str | None) -> str | None:
    """The note of a GPU case whose entry trained ``saved`` ("eager" or a ``torch.compile`` mode: its ``compile``)
    and whose runs trained ``compiled``; None where they match or either is unknown."""
    if not saved or not compiled or saved == compiled:
        return None
    return (f"baseline measured {_how(saved)}; these runs trained {_how(compiled)}: another recipe, not a change "
            f"of speed (--dlperf-set compile=..., docs/gpu.md)")


def _how(label: str) -> str:
    return "eager" if label == "eager" else f"compiled ({label})"


def plain_case(case: Case) -> Case:
    """``case`` without settings equal to its model's defaults (unchanged for an unknown model)."""
    from .. import models

    try:
        return case.without_defaults(models.get_model_spec(case.model).defaults)
    except models.UnknownModelError:
        return case  # the plugin says so at collection, naming the entry


def load(path: str | os.PathLike) -> Baseline:
    """Read, validate and index a baseline; raises :class:`jsonio.DocumentError`."""
    data = jsonio.load(path, "baseline")
    return Baseline(str(path), data, index(path, data))


def index(path: str | os.PathLike | None, data: Mapping[str, Any]) -> list[Entry]:
    """The entries of a schema-valid baseline document; :class:`jsonio.DocumentError` for a case given twice."""
    defaults = data.get("defaults", {})
    default_tol = defaults.get("tolerance")
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    from ..models.registry import name_pattern

    pattern = name_pattern()
    on_gpu = (measured_on(data.get("hardware") or {}, data.get("environment") or {}) or ("cpu",))[0] == "cuda"
    for position, raw in enumerate(data["cases"]):
        if re.fullmatch(pattern, raw["model"]) is None:  # the schema's re.search lets "tiny\n" through
            raise jsonio.DocumentError(path, f"$.cases[{position}].model",
                                       f"{raw['model']!r} does not match {pattern!r}")
        case = plain_case(Case.from_dict(raw))
        if case.id in seen:
            raise jsonio.DocumentError(
                path, f"$.cases[{position}]",
                f"duplicate case {case.id} (also $.cases[{seen[case.id]}])")
        seen[case.id] = position
        entries.append(Entry(
            case=case,
            throughput=float(raw["throughput"]) if "throughput" in raw else None,
            unit=raw.get("unit"),
            tolerance=raw.get("tolerance", default_tol),
            source=jsonio.one_line(raw.get("source") or data.get("provenance", {}).get("source")),
            overrides={k: int(raw[k]) for k in STEP_FIELDS if k in raw},  # 20.0 is an integer to JSON Schema
            index=position,
            min_scaling_efficiency=raw.get("min_scaling_efficiency", defaults.get("min_scaling_efficiency")),
            min_gpu_utilization=raw.get("min_gpu_utilization", defaults.get("min_gpu_utilization")),
            command=raw.get("command"),
            budget=raw.get("budget"), seeds=int(raw["seeds"]) if "seeds" in raw else None,
            time_to_target=raw.get("time_to_target"),
            runs=tuple(float(v) for v in raw.get("runs", ())),
            memory_gbs=float(raw["memory_gbs"]) if "memory_gbs" in raw else None,
            core_gflops=float(raw["core_gflops"]) if "core_gflops" in raw else None,
            probe_runs={k: tuple(float(v) for v in values) for k, values in (raw.get("probe_runs") or {}).items()},
            cpu_threads=int(raw["cpu_threads"]) if "cpu_threads" in raw else None,  # 2.0 is an integer to JSON
            threads_as_before="cpu_threads" not in raw and not on_gpu,
            start=raw.get("start"), host_cpu=raw.get("host_cpu"), compile=raw.get("compile"),
            phases={k: float(v) for k, v in raw["phases"].items()} if "phases" in raw else None,
            profile=raw.get("profile"), host_runs=tuple(float(v) for v in raw.get("host_runs", ())),
        ))
        if "command" in raw and data.get("schema_version") == 1:
            raise jsonio.DocumentError(path, f"$.cases[{position}].command", "a command case needs schema_version 2")
    return entries


def method(entry: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> dict[str, int]:
    """The step counts a baseline entry's figure stands for: the entry's own, else the baseline's
    ``defaults``, else the built-in :data:`STEP_DEFAULTS` (a session's command line comes first,
    and its results record what it used).  ``entry`` None: what a new entry would get."""
    entry = entry or {}
    return {k: entry.get(k, defaults.get(k, STEP_DEFAULTS[k])) for k in STEP_FIELDS}


def record_method(entry: dict[str, Any], measured: Mapping[str, int], defaults: Mapping[str, Any]) -> None:
    """Make ``entry`` stand for the step counts ``measured``: its own where the defaults give others."""
    for key in STEP_FIELDS:
        if key not in measured:
            continue
        if measured[key] == defaults.get(key, STEP_DEFAULTS[key]):
            entry.pop(key, None)
        else:
            entry[key] = measured[key]


def save(path: str | os.PathLike, document: Mapping[str, Any]) -> None:
    """Write a baseline atomically, only when :func:`load` would take it back (schema, no case twice)."""
    jsonio.dump(path, document, "baseline", check=lambda written: index(path, written))
