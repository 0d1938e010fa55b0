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
import datetime as _dt
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import environment as environment_mod
from . import jsonio
from .cases import Case
from .gate.evidence import HOST_PROBES
from .gate.tolerance import Noisy, noisy
from .gate.verdict import Expected

DEFAULT_TOLERANCE = 0.05
STEP_FIELDS = ("warmup_steps", "steps", "repeats")
# The step counts where neither the command line nor the baseline gives any (README: Options).
STEP_DEFAULTS = {"warmup_steps": 20, "steps": 100, "repeats": 5}
#: An entry's host probes (the median of its counted runs' memory_gbs and core_gflops): what the verdict
#: compares a later session's probes with, to name a host that reads far from it (:mod:`pytest_dlperf.gate.evidence`).
PROBE_FIELDS = tuple(probe.key for probe in HOST_PROBES)
#: Entry fields that make a baseline schema version 2.
VERSION_2_FIELDS = ("runs", *PROBE_FIELDS, "probe_runs", "command")


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
    # A convergence case (schema version 2): its budget, seeds and the baseline's median seconds to target.
    budget: Mapping[str, float] | None = None
    seeds: int | None = None
    time_to_target: float | None = None
    runs: tuple[float, ...] = ()  # the medians of the runs the figure came from (schema version 2), for its spread
    memory_gbs: float | None = None  # the memory bandwidth its runs' probe measured (version 2): their median
    core_gflops: float | None = None  # the core speed its runs' core probe measured (version 2), likewise
    #: Each counted run's probe readings, by probe key (version 2): the probes' own spread on that host.
    probe_runs: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def expected(self, unit: str, default_tolerance: float = DEFAULT_TOLERANCE) -> Expected:
        tolerance = self.tolerance if self.tolerance is not None else default_tolerance
        return Expected(self.throughput, self.unit or unit, tolerance, self.source, memory_gbs=self.memory_gbs,
                        core_gflops=self.core_gflops)


@dataclasses.dataclass
class Baseline:
    path: str
    data: dict[str, Any]
    entries: list[Entry]
    selection: Any = None  # picked from a folder for this machine: a machines.Selection

    @property
    def commands(self) -> dict[str, Mapping[str, Any]]:
        """The command objects its entries give, by model name (a baseline saved from its cases keeps them)."""
        return {e.case.model: e.command for e in self.entries if e.command}

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.data.get("defaults", {})

    @property
    def source(self) -> str | None:
        return self.data.get("provenance", {}).get("source")

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

    Different GPU models (compared by :func:`environment.same_gpu_model`), different CPU
    models on a CPU run (:func:`environment.same_cpu_model`) or the same name with another
    instruction set (``baseline_isa``, ``isa``: :func:`environment.cpu_isa`, where both are
    known), or a CPU run against a GPU baseline (and the reverse). None when they match or
    either side is unknown.
    """
    if baseline_device is None or not device.get("type"):
        return None
    kind, model = baseline_device
    name = device.get("name")
    if kind == device["type"]:
        same = environment_mod.same_cpu_model if kind == "cpu" else environment_mod.same_gpu_model
        if kind == "cpu" and model and name and same(model, name) and baseline_isa and isa \
                and set(baseline_isa.split()) != set(isa.split()):
            return f"baseline measured on {model} ({baseline_isa}); this machine has {name} ({isa})"
        if not (model and name) or same(model, name):
            return None
        return f"baseline measured on {model}; this machine has {name}"
    if device["type"] == "cpu":
        return f"baseline measured on {model or 'a GPU'}; this run is on the CPU ({name or 'unknown model'})"
    return f"baseline measured on the CPU ({model or 'unknown model'}); this run is on {name or 'a GPU'}"


def plain_case(case: Case) -> Case:
    """``case`` without settings equal to its model's defaults (unchanged for an unknown model)."""
    from . import models

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
    from .models.registry import name_pattern

    pattern = name_pattern()
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
            source=raw.get("source") or data.get("provenance", {}).get("source"),
            overrides={k: raw[k] for k in STEP_FIELDS if k in raw},
            index=position,
            min_scaling_efficiency=raw.get("min_scaling_efficiency", defaults.get("min_scaling_efficiency")),
            min_gpu_utilization=raw.get("min_gpu_utilization", defaults.get("min_gpu_utilization")),
            command=raw.get("command"),
            budget=raw.get("budget"), seeds=raw.get("seeds"), time_to_target=raw.get("time_to_target"),
            runs=tuple(float(v) for v in raw.get("runs", ())),
            memory_gbs=float(raw["memory_gbs"]) if "memory_gbs" in raw else None,
            core_gflops=float(raw["core_gflops"]) if "core_gflops" in raw else None,
            probe_runs={k: tuple(float(v) for v in values) for k, values in (raw.get("probe_runs") or {}).items()},
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


def hardware_from(environment: Mapping[str, Any]) -> dict[str, Any]:
    """A baseline's ``hardware`` from the session's environment: the device the cases ran on
    (``environment.device``, the workers' report), the GPU model and count, CPU and memory."""
    device = environment.get("device") or {}
    host = environment.get("host") or {}
    gpus = environment.get("gpus") or {}
    kind = device.get("type") if device.get("type") in ("cuda", "cpu") else "cpu"
    hardware: dict[str, Any] = {"device": kind}
    if kind == "cuda":
        hardware["gpu"] = device.get("name") or gpus.get("model") or "unknown GPU"
        if gpus.get("count"):
            hardware["gpus_per_node"] = gpus["count"]
    cpu = device.get("name") if kind == "cpu" and device.get("name") else host.get("cpu")
    if cpu:
        hardware["cpu"] = cpu
    if kind == "cpu" and host.get("cpu_isa"):
        hardware["cpu_isa"] = host["cpu_isa"]  # and this instruction set's
    if kind == "cpu" and host.get("cpu_count"):
        hardware["cpu_count"] = host["cpu_count"]  # a CPU run's figures are this many CPUs'
    if host.get("memory_bytes"):
        hardware["memory"] = f"{host['memory_bytes'] / 2**30:.0f} GiB"
    return hardware


def from_measurements(records: Iterable[Mapping[str, Any]], environment: Mapping[str, Any],
                      tolerance: float = DEFAULT_TOLERANCE, steps: Mapping[str, int] | None = None,
                      noisy_cases: list[Noisy] | None = None,
                      commands: Mapping[str, Mapping[str, Any]] | None = None,
                      max_runs: int | None = None) -> dict[str, Any]:
    """A baseline document from measured cases (``records``: case dict, throughput, unit; as
    ``--dlperf-json`` writes them, with their attempts and stats).

    ``commands``: the command objects of command cases that a baseline gave (model name ->
    object, :attr:`Baseline.commands`); each entry of such a model keeps its command, so the
    saved file runs those cases again without the one they came from.

    Each entry's tolerance is ``tolerance`` (or the record's own ``tolerance``): what was asked for,
    never widened.  Each entry keeps its counted runs' figures (``runs``) and probe readings, so that
    later verdicts pool its spread; where that spread is too large for the tolerance to be decided
    within ``max_runs`` session runs (:func:`pytest_dlperf.gate.tolerance.noisy`), the case is appended to
    ``noisy_cases`` when given, and noted in its entry's ``notes``.
    """
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    host = environment.get("host", {})
    software = {k: v for k, v in environment.get("versions", {}).items() if v is not None}
    hardware = hardware_from(environment)
    cases = []
    for rec in records:
        entry = dict(rec["case"])
        if not entry.get("settings"):
            entry.pop("settings", None)
        entry["throughput"] = round(float(rec["throughput"]), 3)
        entry["unit"] = rec["unit"]
        entry["source"] = f"measured by pytest-dlperf on {host.get('hostname', 'unknown host')} {now.date()}"
        notes = []
        if rec.get("max_batch"):
            notes.append(f"batch_size max: the search chose {rec['max_batch']['chosen']} per device")
        requested = rec.get("tolerance") or tolerance
        if requested != tolerance:
            entry["tolerance"] = requested
        entry.update(run_medians(rec))
        case_id = rec.get("id") or Case.from_dict(rec["case"]).id
        found = noisy(case_id, entry.get("runs") or [], requested, max_runs or 8) if max_runs != 0 else None
        if found is not None:
            notes.append(f"its runs varied {100 * found.cv:.1f}% (CV) when measured: "
                         + ("about {} runs".format(found.needed) if found.needed else "more runs than a session has")
                         + f" decide an unchanged case at {round(100 * requested)}%")
            if noisy_cases is not None:
                noisy_cases.append(found)
        if notes:
            entry["notes"] = "; ".join(notes)
        # Step counts the session-wide defaults do not give: so the figure is re-measured the same way.
        measured_with = rec.get("parameters") or {}
        for key in STEP_FIELDS:
            if key in measured_with and (steps or {}).get(key) != measured_with[key]:
                entry[key] = measured_with[key]
        if commands and entry.get("model") in commands:
            entry["command"] = dict(commands[entry["model"]])
        cases.append(entry)
    return {
        "schema_version": 2 if any(key in c for c in cases for key in VERSION_2_FIELDS) else 1,
        "kind": "dlperf-baseline",
        "hardware": hardware,
        "provenance": {
            "source": f"pytest-dlperf --dlperf-save-baseline on {host.get('hostname', 'unknown host')}",
            "date": now.isoformat(),
            "software": software,
            "measured_by": "pytest-dlperf",
        },
        "environment": dict(environment),
        "defaults": {"tolerance": tolerance, **(steps or {})},
        "cases": cases,
    }


def run_medians(record: Mapping[str, Any]) -> dict[str, Any]:
    """``{"runs": [...], "memory_gbs": ..., "core_gflops": ..., "probe_runs": {...}}``: the medians of a results
    record's evidence runs (2 or more), the median of each of their host probes (one or more) and every
    counted run's probe readings (2 or more); ``{}`` where none.

    A baseline entry keeps them so that a later verdict knows the figure's own spread, and the host's
    probes and their own spread when it was measured (:mod:`pytest_dlperf.gate.evidence`); runs measured on a
    busy machine are left out."""
    runs = counted_runs(record.get("evidence"))
    out: dict[str, Any] = {"runs": [round(r["throughput"], 3) for r in runs]} if len(runs) >= 2 else {}
    readings = {}
    for key in PROBE_FIELDS:
        figure = counted_probe(record.get("evidence"), key)
        if figure is not None:
            out[key] = figure
        values = [round(r[key], 3) for r in runs if r.get(key)]
        if len(values) >= 2:
            readings[key] = values
    if readings:
        out["probe_runs"] = readings
    return out


@dataclasses.dataclass(frozen=True)
class ProbeReference:
    """Host probes a baseline being saved is compared with (:func:`slower_host`): where they come from, for
    the message ("the entry it replaces,"), and their figures."""

    whose: str
    memory_gbs: float | None = None
    core_gflops: float | None = None


def slower_host(entry: Mapping[str, Any], references: Sequence[ProbeReference], tolerance: float) -> str | None:
    """Where an entry being saved read a host probe (``memory_gbs``, ``core_gflops``: the median of its counted
    runs') more than ``tolerance`` below a reference's, why: "core speed 32.4 GFLOP/s, 9% below the entry it
    replaces, 35.6 GFLOP/s" (the first reference that shows it, per probe); else None.

    A baseline measured while the host ran slow (a minute when another tenant took part of its core or its
    memory bandwidth: nothing inside the machine shows it, so its runs are not busy) may sit low by about what
    the host took, and a later slowdown of that size would pass against it: the save says so, and the
    entry keeps the note (a note: the probes decide nothing, :mod:`pytest_dlperf.gate.evidence`).
    """
    found = []
    for probe in HOST_PROBES:
        value = entry.get(probe.key)
        for reference in references:
            figure = getattr(reference, probe.key)
            if value and figure and value < figure * (1 - tolerance):
                found.append(f"{probe.what} {value:.1f} {probe.unit}, {100 * (1 - value / figure):.0f}% below "
                             f"{reference.whose} {figure:.1f} {probe.unit}")
                break
    return "; ".join(found) or None


#: How an entry's note about a host slower than its references' begins (:func:`add_slower_host_note`).
SLOWER_HOST_NOTE = "measured while the host ran slower: "


def add_slower_host_note(entry: dict[str, Any], reason: str) -> None:
    """Append the :func:`slower_host` ``reason`` to the entry's ``notes``, last (so that an update can drop it)."""
    note = SLOWER_HOST_NOTE + reason
    entry["notes"] = f"{entry['notes']}; {note}" if entry.get("notes") else note


def drop_slower_host_note(entry: dict[str, Any]) -> None:
    """Remove a figure's :func:`add_slower_host_note` from its entry, whose figure is being replaced."""
    notes = entry.get("notes") or ""
    if SLOWER_HOST_NOTE in notes:
        kept = notes[:notes.index(SLOWER_HOST_NOTE)].rstrip("; ")
        if kept:
            entry["notes"] = kept
        else:
            entry.pop("notes")


def counted_runs(evidence: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The runs of a results record's ``evidence`` that counted (not measured on a busy machine)."""
    return [r for r in (evidence or {}).get("runs") or [] if not r.get("busy")]


def counted_probe(evidence: Mapping[str, Any] | None, key: str, *, busy_too: bool = False) -> float | None:
    """The median host probe ``key`` (``memory_gbs``, ``core_gflops``) of the counted runs of ``evidence`` (with
    ``busy_too``, of all its runs), or None where none probed."""
    runs = (evidence or {}).get("runs") or [] if busy_too else counted_runs(evidence)
    probes = [r[key] for r in runs if r.get(key)]
    return round(statistics.median(probes), 3) if probes else None


def save(path: str | os.PathLike, document: Mapping[str, Any]) -> None:
    """Write a baseline atomically, only when :func:`load` would take it back (schema, no case twice)."""
    jsonio.dump(path, document, "baseline", check=lambda written: index(path, written))
