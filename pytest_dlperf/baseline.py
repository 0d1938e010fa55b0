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
from collections.abc import Iterable, Mapping
from typing import Any

from . import jsonio
from .cases import Case
from .verdict import Expected

DEFAULT_TOLERANCE = 0.05
STEP_FIELDS = ("warmup_steps", "steps", "repeats")


@dataclasses.dataclass(frozen=True)
class Entry:
    case: Case
    throughput: float
    unit: str | None
    tolerance: float | None  # None: the file gives none, the session's default applies
    source: str | None
    overrides: Mapping[str, int]  # warmup_steps / steps / repeats for this case
    index: int  # position in the file's "cases", for error messages
    min_scaling_efficiency: float | None = None
    min_gpu_utilization: float | None = None  # least mean GPU utilization, as a fraction

    def expected(self, unit: str, default_tolerance: float = DEFAULT_TOLERANCE) -> Expected:
        tolerance = self.tolerance if self.tolerance is not None else default_tolerance
        return Expected(self.throughput, self.unit or unit, tolerance, self.source)


@dataclasses.dataclass
class Baseline:
    path: str
    data: dict[str, Any]
    entries: list[Entry]

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.data.get("defaults", {})

    @property
    def source(self) -> str | None:
        return self.data.get("provenance", {}).get("source")

    @property
    def hardware(self) -> Mapping[str, Any]:
        return self.data.get("hardware", {})

    def reference(self, case: Case) -> Entry | None:
        """The 1-GPU entry of the same model, precision, batch and settings."""
        for entry in self.entries:
            if entry.case.gpus == 1 and entry.case.same_config(case):
                return entry
        return None

    def find(self, case: Case) -> Entry | None:
        for entry in self.entries:
            if entry.case == case:
                return entry
        return None


def load(path: str | os.PathLike) -> Baseline:
    """Read, validate and index a baseline; raises :class:`jsonio.DocumentError`."""
    data = jsonio.load(path, "baseline")
    defaults = data.get("defaults", {})
    default_tol = defaults.get("tolerance")
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data["cases"]):
        case = Case.from_dict(raw)
        if case.id in seen:
            raise jsonio.DocumentError(
                path, f"$.cases[{index}]",
                f"duplicate case {case.id} (also $.cases[{seen[case.id]}])")
        seen[case.id] = index
        entries.append(Entry(
            case=case,
            throughput=float(raw["throughput"]),
            unit=raw.get("unit"),
            tolerance=raw.get("tolerance", default_tol),
            source=raw.get("source") or data.get("provenance", {}).get("source"),
            overrides={k: raw[k] for k in STEP_FIELDS if k in raw},
            index=index,
            min_scaling_efficiency=raw.get("min_scaling_efficiency", defaults.get("min_scaling_efficiency")),
            min_gpu_utilization=raw.get("min_gpu_utilization", defaults.get("min_gpu_utilization")),
        ))
    return Baseline(str(path), data, entries)


def from_measurements(records: Iterable[Mapping[str, Any]], environment: Mapping[str, Any],
                      tolerance: float = DEFAULT_TOLERANCE,
                      steps: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A baseline document from measured cases (``records``: case dict, throughput, unit)."""
    device = environment.get("device", {})
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    host = environment.get("host", {})
    software = {k: v for k, v in environment.get("versions", {}).items() if v is not None}
    hardware: dict[str, Any] = {"device": device.get("type", "cpu")}
    if device.get("name"):
        hardware["gpu" if device.get("type") == "cuda" else "cpu"] = device["name"]
    if host.get("cpu") and "cpu" not in hardware:
        hardware["cpu"] = host["cpu"]
    cases = []
    for rec in records:
        entry = dict(rec["case"])
        if not entry.get("settings"):
            entry.pop("settings", None)
        entry["throughput"] = round(float(rec["throughput"]), 3)
        entry["unit"] = rec["unit"]
        entry["source"] = f"measured by pytest-dlperf on {host.get('hostname', 'unknown host')} {now.date()}"
        if rec.get("max_batch"):
            entry["notes"] = f"batch_size max: the search chose {rec['max_batch']['chosen']} per device"
        cases.append(entry)
    return {
        "schema_version": 1,
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


def save(path: str | os.PathLike, document: Mapping[str, Any]) -> None:
    jsonio.dump(path, document, "baseline")
