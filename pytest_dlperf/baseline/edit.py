"""Baseline maintenance: what changed between two baselines, and a baseline updated from results.

The logic behind ``dlperf baseline diff`` and ``dlperf baseline update``; :mod:`pytest_dlperf.cli`
parses their arguments and prints.  :func:`diff_lines` compares two baseline documents entry
by entry; :func:`updated_baseline` takes the measured figures of a results document into a
baseline, refusing figures measured with other step counts (:func:`method_mismatches`).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import jsonio
from ..cases import Case
from ..gate.evidence import Evidence
from ..gate.format import fmt_value
from ..results.case import CaseResult
from .document import DEFAULT_TOLERANCE, PROBE_FIELDS, STEP_FIELDS, VERSION_2_FIELDS, method, plain_case, record_method
from .measured import (ProbeReference, add_slower_host_note, drop_slower_host_note, kept_runs, slower_host,
                       start_fields)


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    """A nested mapping as ``{"a.b": leaf}``; lists are leaves (compared as a whole)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _show(value: Any) -> str:
    """A value as a diff line shows it; the update log by its length and latest update only."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) and "results" in v for v in value):
        return f"{len(value)} update(s), the latest on {value[-1].get('date')} from {value[-1]['results']}"
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)


def _field_changes(label: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``~``/``+``/``-`` lines for every field that differs between two flattened mappings."""
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            lines.append(f"- {label}{key}: {_show(old[key])}")
        elif key not in old:
            lines.append(f"+ {label}{key}: {_show(new[key])}")
        elif old[key] != new[key]:
            lines.append(f"~ {label}{key}: {_show(old[key])} -> {_show(new[key])}")
    return lines


def _entries(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A baseline's entries by case id (without settings equal to the model's defaults, as
    :func:`baseline.load` has them), in file order."""
    return {_case(raw).id: raw for raw in data["cases"]}


def _case(raw: Mapping[str, Any]) -> Case:
    return plain_case(Case.from_dict(raw))


def _figure(entry: Mapping[str, Any]) -> str:
    """An entry's figure: its throughput, or a convergence case's time to target (a field of its own)."""
    if "throughput" not in entry:
        seconds = entry.get("time_to_target")
        return "convergence case" + (f", time to target {fmt_value(seconds)} s" if seconds is not None else "")
    return f"{fmt_value(entry['throughput'])} {entry.get('unit', '')}".rstrip()


def _entry_changes(case_id: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """How one case's entry changed: the throughput with its difference in %, then any other field."""
    lines = []
    if "throughput" in old and "throughput" in new and old["throughput"] != new["throughput"]:
        pct = 100 * (new["throughput"] / old["throughput"] - 1)
        lines.append(f"~ {case_id}: throughput {fmt_value(old['throughput'])} -> {fmt_value(new['throughput'])} "
                     f"{new.get('unit') or old.get('unit') or ''} ({pct:+.1f}%)".replace("  ", " "))
    rest = [{k: v for k, v in _flatten(e, "").items() if k != "throughput"} for e in (old, new)]
    lines.extend(_field_changes(f"{case_id}: ", *rest))
    return lines


def diff_lines(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], dict[str, int]]:
    """The differences between two baseline documents, cases first, and counts of what changed."""
    before, after = _entries(old), _entries(new)
    lines: list[str] = []
    counts = {"changed": 0, "removed": 0, "added": 0, "unchanged": 0}
    for case_id, entry in before.items():
        if case_id not in after:
            counts["removed"] += 1
            lines.append(f"- {case_id}: {_figure(entry)}")
            continue
        changes = _entry_changes(case_id, entry, after[case_id])
        counts["changed" if changes else "unchanged"] += 1
        lines.extend(changes)
    for case_id, entry in after.items():
        if case_id not in before:
            counts["added"] += 1
            lines.append(f"+ {case_id}: {_figure(entry)}")
    rest = [{k: v for k, v in _flatten(d, "").items() if not k.startswith("cases")}
            for d in ({k: v for k, v in old.items() if k != "cases"}, {k: v for k, v in new.items() if k != "cases"})]
    lines.extend(_field_changes("", *rest))
    return lines, counts


def measured_records(results: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The results' cases with a measured figure (:attr:`CaseResult.measured`), and those without
    (errors, skips, other nodes, data-only)."""
    measured, not_measured = [], []
    for rec in results["cases"]:
        (measured if CaseResult.from_dict(rec).measured else not_measured).append(rec)
    return measured, not_measured


def merge_results(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several sessions' results as one, for a baseline that spans them (``--from`` given more than once).

    Each case measured in any of them gets, as its figure, the median of the counted runs'
    medians of all of them (runs measured on a busy machine left out; a record without runs
    counts its figure as one run), and as its evidence all of those runs: the baseline's spread
    then includes how the machine differed between the sessions, not only within one.  The
    newest session's record gives the rest (case, unit, parameters), and the newest document
    the environment.
    """
    ordered = sorted(documents, key=lambda d: str(d.get("created") or ""))
    merged = copy.deepcopy(dict(ordered[-1]))
    by_case: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for document in ordered:
        for rec in measured_records(document)[0]:
            case_id = _case(rec["case"]).id
            by_case[case_id] = copy.deepcopy(dict(rec))
            evidence = Evidence.from_dict(rec["evidence"]) if rec.get("evidence") else None
            counted = [run.to_dict() for run in evidence.counted] if evidence is not None else []
            runs.setdefault(case_id, []).extend(
                counted or [{"index": 0, "throughput": float(rec["throughput"]), "busy": None}])
    cases = []
    for case_id, rec in by_case.items():
        together = [{**r, "index": i} for i, r in enumerate(runs[case_id])]
        rec["throughput"] = statistics.median(r["throughput"] for r in together)
        rec["evidence"] = {**(rec.get("evidence") or {}), "runs": together}
        cases.append(rec)
    merged["cases"] = cases
    return merged


def updated_baseline(data: Mapping[str, Any], results: Mapping[str, Any], results_path: str | Sequence[str], *,
                     add: bool = True, same_machine: bool = True) -> tuple[dict[str, Any], list[str]]:
    """A copy of the baseline ``data`` with the measured figures of ``results``, and what changed.

    Entries the results did not measure stay as they were; measured ones get the new
    throughput, unit and a source that says where it came from; measured cases without an
    entry are appended (unless ``add`` is false).  ``provenance.updates`` records the update.
    ``same_machine``: whether the results come from the baseline's machine (the caller's hardware check);
    only then are the entries' host probes a reference that says the results' host ran slower.
    """
    document = copy.deepcopy(dict(data))
    entries = _entries(document)
    measured, not_measured = measured_records(results)
    host = (results.get("environment") or {}).get("host", {}).get("hostname", "unknown host")
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    paths = [results_path] if isinstance(results_path, str) else list(results_path)  # several: merge_results
    label = ", ".join(map(str, paths))
    names = ", ".join(Path(p).name for p in paths)
    source = f"measured by pytest-dlperf on {host} ({names}, {results.get('created', now.date())})"
    record: dict[str, Any] = {"date": now.isoformat(), "results": label,
                              "results_created": results.get("created"), "host": host,
                              "updated": [], "added": []}
    lines = []
    defaults = document.get("defaults", {})
    for rec in measured:
        case = _case(rec["case"])
        new = round(float(rec["throughput"]), 3)
        if not new > 0:
            position = results["cases"].index(rec)
            raise jsonio.DocumentError(label, f"$.cases[{position}].throughput",
                                       f"{rec['throughput']!r} cannot be a baseline figure; expected a number "
                                       f"greater than 0 (at 3 decimals)")
        params = {k: rec.get("parameters", {}).get(k) for k in (*STEP_FIELDS, "runs")}
        entry = entries.get(case.id)
        if entry is None and not add:
            lines.append(f"not added (--no-add): {case.id}: {fmt_value(new)} {rec['unit']}")
            continue
        if entry is None:
            entry = {k: v for k, v in case.to_dict().items() if k != "settings" or v}
            document["cases"].append(entry)
            record["added"].append({"case": case.id, "throughput": new, "parameters": params})
            lines.append(f"added {case.id}: {fmt_value(new)} {rec['unit']}")
        else:
            old = entry["throughput"]
            record["updated"].append({"case": case.id, "from": old, "to": new, "old_source": entry.get("source"),
                                      "parameters": params})
            lines.append(f"updated {case.id}: {fmt_value(old)} -> {fmt_value(new)} {rec['unit']} "
                         f"({100 * (new / old - 1):+.1f}%)")
        lines.extend(_refresh(entry, rec, new, source, defaults, same_machine))
        if any(key in entry for key in VERSION_2_FIELDS):
            document["schema_version"] = 2
    touched = {c["case"] for c in record["updated"] + record["added"]}
    kept = [case_id for case_id in entries if case_id not in touched]
    if kept:
        lines.append(f"kept {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} the results did not measure")
    lines.extend(f"not measured: {rec['id']} ({rec.get('verdict')})" for rec in not_measured)
    if touched:
        document.setdefault("provenance", {"source": "pytest-dlperf"}).setdefault("updates", []).append(record)
    return document, lines


def _refresh(entry: dict[str, Any], rec: Mapping[str, Any], new: float, source: str, defaults: Mapping[str, Any],
             same_machine: bool) -> list[str]:
    """``entry`` with the figure ``new`` of the results record ``rec``: its runs and host probes, a note where the
    host ran slower than when the entry was measured (``same_machine`` only), the step counts it stands for."""
    lines = []
    case_id = _case(rec["case"]).id
    entry.update(throughput=new, unit=rec["unit"], source=source)
    replaced = ProbeReference("the entry it replaces,", entry.get("memory_gbs"), entry.get("core_gflops"))
    for key in ("runs", *PROBE_FIELDS, "start", "host_cpu", "compile"):
        entry.pop(key, None)
    entry.update(kept_runs(rec))  # the new figure's own runs and host probes, or none
    entry.update(start_fields(rec))  # how its workers started, a host-bound figure's CPU
    drop_slower_host_note(entry)
    if same_machine:
        tolerance = entry.get("tolerance", defaults.get("tolerance", DEFAULT_TOLERANCE))
        reason = slower_host(entry, [replaced], tolerance)
        if reason:
            add_slower_host_note(entry, reason)
            lines.append(f"{case_id}: measured while the host ran slower: {reason}; a slowdown that size "
                         "can pass against its figure (update it from several sessions' results: --from each)")
    # The entry stands for the step counts the figure was measured with (cmd_update has checked
    # that they are the entry's own unless --force).
    measured_with = {k: v for k, v in (rec.get("parameters") or {}).items()
                     if k in STEP_FIELDS and isinstance(v, int) and not isinstance(v, bool)}
    record_method(entry, measured_with, defaults)
    threads = (rec.get("parameters") or {}).get("cpu_threads")
    if threads is not None:  # a CPU case: the threads the figure was measured with (cmd_update has checked them)
        entry["cpu_threads"] = threads
    return lines


def _steps(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {counts.get(k, '?')}" for k in STEP_FIELDS)


def method_mismatches(data: Mapping[str, Any], results: Mapping[str, Any], *, add: bool = True) -> list[str]:
    """For each measured case whose step counts are not its baseline entry's (or, for a new case,
    the baseline's defaults'), or whose CPU threads are not the ones its entry records, what differs: its
    figure would stand for another measurement."""
    entries = _entries(data)
    positions = {case_id: i for i, case_id in enumerate(entries)}
    defaults = data.get("defaults", {})
    problems = []
    for rec in measured_records(results)[0]:
        case_id = _case(rec["case"]).id
        entry = entries.get(case_id)
        if entry is None and not add:
            continue
        expected = method(entry, defaults)
        measured = {k: v for k, v in (rec.get("parameters") or {}).items() if k in STEP_FIELDS}
        where = f"$.cases[{positions[case_id]}]" if entry is not None else "$.defaults"
        theirs = "its entry's" if entry is not None else "the defaults'"
        if any(measured.get(k) != expected[k] for k in STEP_FIELDS):
            problems.append(f"{where}: {case_id} was measured with {_steps(measured)}, not {theirs} "
                            f"{_steps(expected)}")
        threads, recorded = (rec.get("parameters") or {}).get("cpu_threads"), (entry or {}).get("cpu_threads")
        if threads is not None and recorded is not None and threads != recorded:
            problems.append(f"{where}: {case_id} was measured with cpu_threads {threads}, not its entry's {recorded}")
    return problems
