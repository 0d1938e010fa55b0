"""The ``dlperf`` command: reports from results files, and baseline maintenance.

    dlperf report results.json -o report.md         # the Markdown report, logs copied beside it
    dlperf plot results.json -o plots/              # PNGs: throughput vs GPUs, measured vs baseline
    dlperf dataset DIR                              # a small JPEG ImageFolder for smoke runs
    dlperf baseline validate baselines/v100.json    # is it a usable baseline?
    dlperf baseline diff old.json new.json          # what changed between two baselines
    dlperf baseline update my.json --from results.json   # take the measured figures

Exit status, as diff(1) and grep(1) have it: 0 when all is well (valid, no differences,
written); 1 when the answer is "no" (``validate``: a file is invalid; ``diff``: the
baselines differ; ``update``: the results were measured with other step counts than the
entries', so nothing is written unless ``--force``); 2 for trouble: a usage error, an input
file that cannot be read or is not a valid document of its kind (the message names the file,
the JSON path and what is expected), or an output that cannot be written.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import __version__, jsonio
from .reporting import markdown as markdown_report
from . import baseline as baseline_mod
from .cases import Case
from .results import CaseResult, cases_from
from .verdict import fmt_value

OK, NO, TROUBLE = 0, 1, 2


class Trouble(Exception):
    """A problem that ends the command with status 2; its message is printed after ``dlperf:``."""


def _print(*lines: str) -> None:
    for line in lines:
        print(line)


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    """Render the Markdown report of a results file: to ``-o PATH`` (logs copied beside it) or stdout."""
    document = jsonio.load(args.results, "results")
    cases = cases_from(document)
    search_dirs = (Path.cwd(), Path(args.results).resolve().parent)
    if args.output in (None, "-"):
        runs = markdown_report.find_runs(cases, search_dirs)
        sys.stdout.write(markdown_report.render_linked(document, runs, Path.cwd(), cases=cases))
        return OK
    jsonio.check_output(args.output)  # a folder, a device, a FIFO: refused before the logs are copied
    written = markdown_report.write_report(document, args.output, search_dirs=search_dirs,
                                           copy=not args.no_copy_logs, cases=cases)
    logs = f"; logs of {written.runs} run(s) in {written.logs}" if written.logs else ""
    _print(f"dlperf: wrote {written.path} ({len(cases)} case(s){logs})")
    if written.problem:
        print(f"dlperf: warning: {written.problem}; the report links the original log folders", file=sys.stderr)
    return OK


# --------------------------------------------------------------------------- baseline validate


def cmd_validate(args: argparse.Namespace) -> int:
    """Check each file: 0 when all are valid baselines, 1 when one is not, 2 when one cannot be read."""
    status = OK
    for path in args.files:
        try:
            loaded = baseline_mod.load(path)
        except jsonio.UnreadableError as exc:
            print(f"dlperf: {exc}", file=sys.stderr)
            status = TROUBLE
            continue
        except jsonio.DocumentError as exc:
            print(f"dlperf: {exc}", file=sys.stderr)
            status = max(status, NO)
            continue
        source = f"; source: {loaded.source}" if loaded.source else ""
        _print(f"{path}: valid baseline, {len(loaded.entries)} case(s){source}")
    return status


# --------------------------------------------------------------------------- baseline diff


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
    return baseline_mod.plain_case(Case.from_dict(raw))


def _entry_changes(case_id: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """How one case's entry changed: the throughput with its difference in %, then any other field."""
    lines = []
    if old["throughput"] != new["throughput"]:
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
            lines.append(f"- {case_id}: {fmt_value(entry['throughput'])} {entry.get('unit', '')}".rstrip())
            continue
        changes = _entry_changes(case_id, entry, after[case_id])
        counts["changed" if changes else "unchanged"] += 1
        lines.extend(changes)
    for case_id, entry in after.items():
        if case_id not in before:
            counts["added"] += 1
            lines.append(f"+ {case_id}: {fmt_value(entry['throughput'])} {entry.get('unit', '')}".rstrip())
    rest = [{k: v for k, v in _flatten(d, "").items() if not k.startswith("cases")}
            for d in ({k: v for k, v in old.items() if k != "cases"}, {k: v for k, v in new.items() if k != "cases"})]
    lines.extend(_field_changes("", *rest))
    return lines, counts


def cmd_diff(args: argparse.Namespace) -> int:
    """Print how NEW differs from OLD; 0 when they agree, 1 when they differ."""
    old = baseline_mod.load(args.old).data
    new = baseline_mod.load(args.new).data
    lines, counts = diff_lines(old, new)
    if not lines:
        _print(f"{args.old} and {args.new}: no differences ({counts['unchanged']} case(s))")
        return OK
    _print(f"--- {args.old}", f"+++ {args.new}", *lines)
    _print(", ".join(f"{n} case(s) {what}" for what, n in counts.items() if n))
    return NO


# --------------------------------------------------------------------------- baseline update


def measured_records(results: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The results' cases with a measured figure (:attr:`CaseResult.measured`), and those without
    (errors, skips, other nodes, data-only)."""
    measured, not_measured = [], []
    for rec in results["cases"]:
        (measured if CaseResult.from_dict(rec).measured else not_measured).append(rec)
    return measured, not_measured


def updated_baseline(data: Mapping[str, Any], results: Mapping[str, Any], results_path: str, *,
                     add: bool = True) -> tuple[dict[str, Any], list[str]]:
    """A copy of the baseline ``data`` with the measured figures of ``results``, and what changed.

    Entries the results did not measure stay as they were; measured ones get the new
    throughput, unit and a source that says where it came from; measured cases without an
    entry are appended (unless ``add`` is false).  ``provenance.updates`` records the update.
    """
    document = copy.deepcopy(dict(data))
    entries = _entries(document)
    measured, not_measured = measured_records(results)
    host = (results.get("environment") or {}).get("host", {}).get("hostname", "unknown host")
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    source = f"measured by pytest-dlperf on {host} ({Path(results_path).name}, {results.get('created', now.date())})"
    record: dict[str, Any] = {"date": now.isoformat(), "results": str(results_path),
                              "results_created": results.get("created"), "host": host,
                              "updated": [], "added": []}
    lines = []
    defaults = document.get("defaults", {})
    for rec in measured:
        case = _case(rec["case"])
        new = round(float(rec["throughput"]), 3)
        if not new > 0:
            position = results["cases"].index(rec)
            raise jsonio.DocumentError(results_path, f"$.cases[{position}].throughput",
                                       f"{rec['throughput']!r} cannot be a baseline figure; expected a number "
                                       f"greater than 0 (at 3 decimals)")
        params = {k: rec.get("parameters", {}).get(k) for k in (*baseline_mod.STEP_FIELDS, "runs")}
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
        entry.update(throughput=new, unit=rec["unit"], source=source)
        # The entry stands for the step counts the figure was measured with (cmd_update has checked
        # that they are the entry's own unless --force).
        measured_with = {k: v for k, v in (rec.get("parameters") or {}).items()
                         if k in baseline_mod.STEP_FIELDS and isinstance(v, int) and not isinstance(v, bool)}
        baseline_mod.record_method(entry, measured_with, defaults)
    touched = {c["case"] for c in record["updated"] + record["added"]}
    kept = [case_id for case_id in entries if case_id not in touched]
    if kept:
        lines.append(f"kept {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} the results did not measure")
    lines.extend(f"not measured: {rec['id']} ({rec.get('verdict')})" for rec in not_measured)
    if touched:
        document.setdefault("provenance", {"source": "pytest-dlperf"}).setdefault("updates", []).append(record)
    return document, lines


def _steps(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {counts.get(k, '?')}" for k in baseline_mod.STEP_FIELDS)


def method_mismatches(data: Mapping[str, Any], results: Mapping[str, Any], *, add: bool = True) -> list[str]:
    """For each measured case whose step counts are not its baseline entry's (or, for a new case,
    the baseline's defaults'), what differs: its figure would stand for another measurement."""
    entries = _entries(data)
    positions = {case_id: i for i, case_id in enumerate(entries)}
    defaults = data.get("defaults", {})
    problems = []
    for rec in measured_records(results)[0]:
        case_id = _case(rec["case"]).id
        entry = entries.get(case_id)
        if entry is None and not add:
            continue
        expected = baseline_mod.method(entry, defaults)
        measured = {k: v for k, v in (rec.get("parameters") or {}).items() if k in baseline_mod.STEP_FIELDS}
        if all(measured.get(k) == expected[k] for k in baseline_mod.STEP_FIELDS):
            continue
        where = f"$.cases[{positions[case_id]}]" if entry is not None else "$.defaults"
        theirs = "its entry's" if entry is not None else "the defaults'"
        problems.append(f"{where}: {case_id} was measured with {_steps(measured)}, not {theirs} {_steps(expected)}")
    return problems


def cmd_plot(args: argparse.Namespace) -> int:
    """Draw the PNG plots of a results file into ``-o DIR`` (the plot extra: matplotlib)."""
    from .reporting import plots

    missing = plots.missing_matplotlib("dlperf plot")
    if missing:
        raise Trouble(missing)
    document = jsonio.load(args.results, "results")
    notes: list[str] = []
    written = plots.write_plots(cases_from(document), Path(args.output), notes)
    _print(f"dlperf: {len(written)} plot(s) in {Path(args.output).resolve()}", *(f"  {p.name}" for p in written),
           *(f"  {note}" for note in notes))
    return OK


def cmd_dataset(args: argparse.Namespace) -> int:
    """Write a small JPEG ImageFolder, for smoke runs of the torchvision and DALI backends."""
    from . import data

    root = Path(args.dir)
    if root.exists() and any(root.iterdir()):
        raise Trouble(f"{root}: not empty; give a new or empty folder")
    count = data.write_image_folder(root, args.classes, args.per_class, (args.min_size, args.max_size))
    _print(f"dlperf: wrote {count} JPEG images in {args.classes} class folders to {root}")
    return OK


def cmd_update(args: argparse.Namespace) -> int:
    """Take the measured figures of a results file into a baseline, atomically; say what changed."""
    loaded = baseline_mod.load(args.file)
    results = jsonio.load(args.results, "results")
    device = (results.get("environment") or {}).get("device") or {}
    mismatch = loaded.device_mismatch(device)  # the same comparison as the verdicts' note
    if mismatch and not args.force:
        raise Trouble(f"{args.file}: $.hardware: {mismatch}; not updated (--force updates anyway)")
    other_method = method_mismatches(loaded.data, results, add=not args.no_add)
    if other_method and not args.force:
        more = f" (and {len(other_method) - 1} more case(s))" if len(other_method) > 1 else ""
        print(f"dlperf: {args.file}: {other_method[0]}{more}; not updated (--force takes the figures with "
              f"their step counts)", file=sys.stderr)
        return NO
    document, lines = updated_baseline(loaded.data, results, args.results, add=not args.no_add)
    _print(*lines)
    if document == loaded.data:
        _print(f"{args.file}: nothing to update")
        return OK
    if args.dry_run:
        jsonio.validate(document, "baseline", args.file)
        baseline_mod.index(args.file, document)  # what save checks too: no case twice
        _print(f"{args.file}: not written (--dry-run)")
        return OK
    baseline_mod.save(args.file, document)
    _print(f"{args.file}: updated")
    return OK


# --------------------------------------------------------------------------- parser and main


def build_parser() -> argparse.ArgumentParser:
    """The ``dlperf`` argument parser: ``report`` and ``baseline validate|diff|update``."""
    parser = argparse.ArgumentParser(
        prog="dlperf", description="pytest-dlperf's reports and baseline maintenance.",
        epilog="Exit status: 0 ok; 1 invalid (validate), different (diff) or measured with other step counts "
               "(update); 2 usage error, an input file that cannot be read or is not valid, or an output "
               "that cannot be written.")
    parser.add_argument("--version", action="version", version=f"pytest-dlperf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report = commands.add_parser("report", help="render the Markdown report of a results file",
                                 description="Render the Markdown report of a --dlperf-json results file. "
                                             "With -o PATH.md, each run's log folder is copied to "
                                             "<stem>-logs/ beside it (report.md -> report-logs/) and "
                                             "linked relatively.")
    report.add_argument("results", metavar="RESULTS", help="the session results (--dlperf-json)")
    report.add_argument("-o", "--output", metavar="PATH", help="write the report here (default: stdout, "
                                                                 "linking the original log folders)")
    report.add_argument("--no-copy-logs", action="store_true", help="link the original log folders "
                                                                    "instead of copying them")
    report.set_defaults(func=cmd_report)

    plot = commands.add_parser("plot", help="draw the PNG plots of a results file",
                               description="Draw PNG plots of a --dlperf-json results file: throughput vs "
                                           "GPUs against ideal linear scaling per model and precision, and "
                                           "measured vs baseline per unit. Needs matplotlib (the plot extra).")
    plot.add_argument("results", metavar="RESULTS", help="the session results (--dlperf-json)")
    plot.add_argument("-o", "--output", metavar="DIR", required=True, help="the folder to write the PNGs to")
    plot.set_defaults(func=cmd_plot)

    dataset = commands.add_parser("dataset", help="write a small JPEG ImageFolder for smoke runs",
                                  description="Write random JPEG images in the ImageFolder layout "
                                              "(DIR/class0/0.jpg, ...), for --dlperf-data-dir smoke runs "
                                              "of the torchvision and DALI backends without ImageNet.")
    dataset.add_argument("dir", metavar="DIR", help="a new or empty folder")
    dataset.add_argument("--classes", type=int, default=4, help="class folders (default 4)")
    dataset.add_argument("--per-class", type=int, default=100, help="images per class (default 100)")
    dataset.add_argument("--min-size", type=int, default=64, help="smallest side in pixels (default 64)")
    dataset.add_argument("--max-size", type=int, default=160, help="largest side in pixels (default 160)")
    dataset.set_defaults(func=cmd_dataset)

    baseline = commands.add_parser("baseline", help="validate, compare or update baseline files",
                                   description="Validate, compare or update baseline files.")
    actions = baseline.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = actions.add_parser("validate", help="check baseline files against the schema",
                                  description="Check baseline files: JSON, the schema, no duplicate case. "
                                              "Exit 0 when all are valid, 1 when one is not, 2 when one "
                                              "cannot be read.")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=cmd_validate)

    diff = actions.add_parser("diff", help="show how two baselines differ",
                              description="Show how NEW differs from OLD: cases removed (-), added (+) and "
                                          "changed (~, throughput in %), then the other fields. Exit 0 when "
                                          "they agree, 1 when they differ, 2 when one is unreadable or invalid.")
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.set_defaults(func=cmd_diff)

    update = actions.add_parser("update", help="take measured figures from a results file",
                                description="Update FILE with the measured medians of a results file: "
                                            "entries the results did not measure stay, measured cases get "
                                            "the new figure and a source, new cases are added, and "
                                            "provenance.updates records the update. Results measured with "
                                            "other step counts (warmup_steps, steps, repeats) than an entry's "
                                            "(or, for a new case, the defaults') are refused with exit status "
                                            "1 unless --force. Written atomically; nothing is written when "
                                            "either file is invalid.")
    update.add_argument("file", metavar="FILE", help="the baseline to update")
    update.add_argument("--from", dest="results", metavar="RESULTS", required=True,
                        help="the session results (--dlperf-json)")
    update.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    update.add_argument("--no-add", action="store_true", help="only update existing entries")
    update.add_argument("--force", action="store_true",
                        help="update even when the results come from other hardware than the baseline's, or "
                             "were measured with other step counts than the entries' (the entries then "
                             "record the results' step counts)")
    update.set_defaults(func=cmd_update)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dlperf`` with ``argv`` (default: the command line); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors (2)
        return int(exc.code or 0)
    try:
        return args.func(args)
    except (jsonio.DocumentError, Trouble) as exc:
        print(f"dlperf: {exc}", file=sys.stderr)
    except OSError as exc:  # an output that cannot be written
        print(f"dlperf: {exc}", file=sys.stderr)
    return TROUBLE


if __name__ == "__main__":  # pragma: no cover - python -m pytest_dlperf.cli
    sys.exit(main())
