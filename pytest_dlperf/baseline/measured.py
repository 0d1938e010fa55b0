"""Saving a baseline: the document a session's measured cases make (``--dlperf-save-baseline``,
``dlperf baseline update``), the runs and host probes each entry keeps, and the note of a host that ran slower.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..cases import Case
from ..gate.evidence import Evidence
from ..gate.figures import HOST_PROBES
from ..gate.rules import VERDICT_RULES
from ..gate.tolerance import Noisy, noisy
from .document import DEFAULT_TOLERANCE, STEP_FIELDS, VERSION_2_FIELDS


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
        first = (gpus.get("devices") or [{}])[0] or {}
        board = {"gpu_memory_gib": round(first["memory_bytes"] / 2**30, 1) if first.get("memory_bytes") else None,
                 "gpu_power_limit_w": first.get("power_limit_w"), "gpu_sm_clock_mhz": first.get("max_sm_clock_mhz")}
        hardware.update((key, value) for key, value in board.items() if value)  # what tells boards of one name apart
    cpu = device.get("name") if kind == "cpu" and device.get("name") else host.get("cpu")
    if cpu:
        hardware["cpu"] = cpu
    if kind == "cpu" and host.get("cpu_isa"):
        hardware["cpu_isa"] = host["cpu_isa"]  # and this instruction set's
    if kind == "cpu" and host.get("cpu_signature"):
        hardware["cpu_signature"] = host["cpu_signature"]  # and this generation's
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
    source = f"measured by pytest-dlperf on {host.get('hostname', 'unknown host')} {now.date()}"
    cases = [_entry(rec, source, tolerance, steps, noisy_cases, commands, max_runs) for rec in records]
    return {
        "schema_version": 2 if any(key in c for c in cases for key in VERSION_2_FIELDS) else 1,
        "kind": "dlperf-baseline",
        "hardware": hardware,
        "provenance": {
            "source": f"pytest-dlperf --dlperf-save-baseline on {host.get('hostname', 'unknown host')}",
            "date": now.isoformat(),
            "software": software,
            "measured_by": "pytest-dlperf",
            "verdict_rules": VERDICT_RULES,  # the rules its figures were measured and refused under
        },
        "environment": dict(environment),
        "defaults": {"tolerance": tolerance, **(steps or {})},
        "cases": cases,
    }


def kept_runs(record: Mapping[str, Any]) -> dict[str, Any]:
    """``{"runs": [...], "memory_gbs": ..., "core_gflops": ..., "probe_runs": {...}, "phases": {...}, "profile":
    {...}}``: the medians of a results record's evidence runs (2 or more), the median of each of their host probes
    (one or more), every counted run's probe readings (2 or more), the case's phases and its profile; ``{}`` where
    none.

    A baseline entry keeps them so that a later verdict knows the figure's own spread, and the host's
    probes and their own spread when it was measured (:mod:`pytest_dlperf.gate.evidence`); runs measured on a
    busy machine are left out."""
    evidence = Evidence.from_dict(record["evidence"]) if record.get("evidence") else None
    runs = evidence.counted if evidence is not None else []
    out: dict[str, Any] = {"runs": [round(r.value, 3) for r in runs]} if len(runs) >= 2 else {}
    readings = {}
    for probe in HOST_PROBES:
        figure = evidence.probe_median(probe.key) if evidence is not None else None
        if figure is not None:
            out[probe.key] = figure
        values = [round(r.probe(probe), 3) for r in runs if r.probe(probe)]
        if len(values) >= 2:
            readings[probe.key] = values
    if readings:
        out["probe_runs"] = readings
    hosts = [round(r.host, 4) for r in runs if r.host]
    if len(hosts) >= 2:  # the controller's own probe after each counted run (pytest_dlperf.gate.host)
        out["host_runs"] = hosts
    if record.get("phases"):  # where its step's time went (pytest_dlperf.gate.attribution)
        out["phases"] = {name: round(value, 7) for name, value in record["phases"].items()}
    if record.get("profile"):  # its top operators (--dlperf-profile), without the trace of a session's folder
        out["profile"] = {key: value for key, value in record["profile"].items() if key != "trace"}
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
    entry keeps the note (a note: the probes decide nothing, :mod:`pytest_dlperf.gate.figures`).
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


def start_fields(rec: Mapping[str, Any]) -> dict[str, str]:
    """What of a results record's start an entry keeps: how its workers started (``start``: a session that starts
    them otherwise says so), how a GPU case trained (``compile``: eager or the mode; likewise), and where its GPUs
    idled, the host's CPU model (``host_cpu``: its figure is that CPU's too; gated on another, the session says so)."""
    out = {"start": rec["start"]} if rec.get("start") in ("forked", "fresh") else {}
    if (rec.get("device") or {}).get("type") == "cuda" and rec.get("compile") not in (None, "mixed"):
        out["compile"] = rec["compile"]  # how a GPU case trained: eager, or compiled in a mode
    bound = rec.get("host_bound") or {}
    if bound.get("bound") and bound.get("cpu"):
        out["host_cpu"] = bound["cpu"]
    return out


def _entry(rec: Mapping[str, Any], source: str, tolerance: float, steps: Mapping[str, int] | None,
           noisy_cases: list[Noisy] | None, commands: Mapping[str, Mapping[str, Any]] | None,
           max_runs: int | None) -> dict[str, Any]:
    """One measured case's entry (:func:`from_measurements`)."""
    entry = dict(rec["case"])
    if not entry.get("settings"):
        entry.pop("settings", None)
    entry["throughput"] = round(float(rec["throughput"]), 3)
    entry["unit"] = rec["unit"]
    entry["source"] = source
    notes = []
    if rec.get("max_batch"):
        notes.append(f"batch_size max: the search chose {rec['max_batch']['chosen']} per device")
    requested = rec.get("tolerance") or tolerance
    if requested != tolerance:
        entry["tolerance"] = requested
    entry.update(kept_runs(rec))
    case_id = rec.get("id") or Case.from_dict(rec["case"]).id
    found = noisy(case_id, entry.get("runs") or [], requested, max_runs or 8,
                  entry.get("host_runs") or ()) if max_runs != 0 else None
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
    if measured_with.get("cpu_threads") is not None:  # a CPU case: a later session runs it with as many threads
        entry["cpu_threads"] = measured_with["cpu_threads"]
    entry.update(start_fields(rec))
    if commands and entry.get("model") in commands:
        entry["command"] = dict(commands[entry["model"]])
    return entry
