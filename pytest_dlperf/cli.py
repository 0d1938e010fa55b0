"""The ``dlperf`` command: reports from results files, and baseline maintenance.

    dlperf report results.json -o report.md         # the Markdown report, logs copied beside it
    dlperf plot results.json -o plots/              # PNGs: throughput vs GPUs, measured vs baseline
    dlperf dataset DIR                              # a small JPEG ImageFolder for smoke runs
    dlperf history sqlite:///history.db --plot hist/  # trends and change points of a --dlperf-history store
    dlperf history import sqlite:///history.db r.json  # earlier nights' results files into the store
    dlperf dataset --learnable --classes 4 --out DIR   # a learnable set, train/ and val/ splits
    dlperf baseline validate baselines/v100.json    # is it a usable baseline?
    dlperf baseline diff old.json new.json          # what changed between two baselines
    dlperf baseline update my.json --from results.json   # take the measured figures
    dlperf compare new.json old.json                # two results files, case by case, as the gate judges
    dlperf bmf results.json -o bmf.json             # the Bencher Metric Format, for bencher run --adapter json
    dlperf explain new.json old.json                # the operators that changed (--dlperf-profile's tables)

Exit status, as diff(1) and grep(1) have it: 0 when all is well (valid, no differences,
written); 1 when the answer is "no" (``validate``: a file is invalid; ``diff``: the
baselines differ; ``compare``: a case of NEW is slower than OLD's beyond the tolerance; ``update``:
the results were measured with other step counts or CPU threads than the entries', so nothing is
written unless ``--force``); 2 for trouble: a usage error, an input file that cannot be read or is
not a valid document of its kind (the message names the file, the JSON path and what is expected),
or an output that cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__, jsonio
from . import baseline as baseline_mod
from .baseline.edit import diff_lines, merge_results, method_mismatches, updated_baseline
from .history import command as history_command
from .reporting import bmf as bmf_mod
from .reporting import compare as compare_mod
from .reporting import explain as explain_mod
from .reporting import markdown as markdown_report
from .results.case import cases_from

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


# --------------------------------------------------------------------------- compare


def cmd_compare(args: argparse.Namespace) -> int:
    """Judge NEW's cases against OLD's (:mod:`pytest_dlperf.reporting.compare`); 1 where one is slower."""
    if not 0 < args.tolerance < 1:
        raise Trouble(f"--tolerance {args.tolerance}: expected a fraction between 0 and 1, as 0.05 for 5%")
    new, old = (cases_from(jsonio.load(path, "results")) for path in (args.new, args.old))
    found = compare_mod.compare(new, old, args.tolerance)
    _print(*compare_mod.table(found, args.tolerance))
    slower = [c.case_id for c in found if c.word == "slower"]
    _print(f"dlperf: {len(slower)} of {sum(c.decision is not None for c in found)} case(s) in both files slower in "
           f"{args.new} than in {args.old}" + (f": {', '.join(slower)}" if slower else ""))
    return NO if slower else OK


def cmd_bmf(args: argparse.Namespace) -> int:
    """A results file as Bencher Metric Format JSON (:mod:`pytest_dlperf.reporting.bmf`): to ``-o PATH`` or stdout."""
    document = bmf_mod.document(cases_from(jsonio.load(args.results, "results")))
    if args.output in (None, "-"):
        jsonio.validate(document, "bmf")
        print(json.dumps(document, indent=2))
        return OK
    jsonio.dump(args.output, document, "bmf")
    _print(f"dlperf: wrote {args.output} ({len(document)} benchmark(s))")
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

    if args.dir and args.out:
        raise Trouble(f"give the folder once: DIR ({args.dir}) or --out ({args.out})")
    if not (args.dir or args.out):
        raise Trouble("dataset: give the folder to write, DIR or --out DIR")
    root = Path(args.dir or args.out)
    if args.learnable:
        from .data.learnable import DatasetError, write_learnable

        try:
            counts = write_learnable(root, args.classes, args.per_class, args.val_per_class, args.size,
                                     force=args.force)
        except DatasetError as exc:
            raise Trouble(str(exc)) from None
        _print(f"dlperf: wrote a learnable set of {args.classes} classes to {root}: {counts['train']} train and "
               f"{counts['val']} val PNG images ({args.size}x{args.size})")
        return OK
    if root.exists() and any(root.iterdir()):
        raise Trouble(f"{root}: not empty; give a new or empty folder")
    count = data.write_image_folder(root, args.classes, args.per_class, (args.min_size, args.max_size))
    _print(f"dlperf: wrote {count} JPEG images in {args.classes} class folders to {root}")
    return OK


def cmd_update(args: argparse.Namespace) -> int:
    """Take the measured figures of a results file into a baseline, atomically; say what changed."""
    loaded = baseline_mod.load(args.file)
    documents = [jsonio.load(path, "results") for path in args.results]  # every file valid before anything
    same_machine = True
    for path, results in zip(args.results, documents):
        which = f" ({path})" if len(documents) > 1 else ""
        device = (results.get("environment") or {}).get("device") or {}
        isa = ((results.get("environment") or {}).get("host") or {}).get("cpu_isa")
        mismatch = loaded.device_mismatch(device, isa)  # the same comparison as the verdicts' note
        same_machine = same_machine and mismatch is None
        if mismatch and not args.force:
            raise Trouble(f"{args.file}: $.hardware: {mismatch}{which}; not updated (--force updates anyway)")
        other_method = method_mismatches(loaded.data, results, add=not args.no_add)
        if other_method and not args.force:
            more = f" (and {len(other_method) - 1} more case(s))" if len(other_method) > 1 else ""
            print(f"dlperf: {args.file}: {other_method[0]}{more}{which}; not updated (--force takes the figures "
                  f"with their step counts and CPU threads)", file=sys.stderr)
            return NO
    results = documents[0] if len(documents) == 1 else merge_results(documents)
    document, lines = updated_baseline(loaded.data, results, args.results, add=not args.no_add,
                                       same_machine=same_machine)
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


def cmd_options(args: argparse.Namespace) -> int:
    from .options import option_reference

    print(option_reference(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``dlperf`` argument parser: its subcommands."""
    parser = argparse.ArgumentParser(
        prog="dlperf", description="pytest-dlperf's reports and baseline maintenance.",
        epilog="Exit status: 0 ok; 1 invalid (validate), different (diff), a case slower (compare), nothing to "
               "explain (explain) or measured "
               "with other step counts or CPU threads (update); 2 usage error, an input file that cannot be read "
               "or is not valid, or an output that cannot be written.")
    parser.add_argument("--version", action="version", version=f"pytest-dlperf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_reading_commands(commands)
    history_command.add_parser(commands)
    options = commands.add_parser("options", help="print every --dlperf-* option and its ini twin as Markdown "
                                                  "(docs/options.md)")
    options.set_defaults(func=cmd_options)
    add_dataset_command(commands)
    add_baseline_commands(commands)
    add_result_commands(commands)
    explain_mod.add_parser(commands)
    return parser


def add_result_commands(commands) -> None:
    """``dlperf compare`` and ``dlperf bmf``."""
    compare = commands.add_parser(
        "compare", help="judge the cases of one results file against another's",
        description="Judge each case of NEW against the same case of OLD (two --dlperf-json results files) as a "
                    "session is judged against a saved baseline: both files' run figures, the 98%% interval of "
                    "their ratio with the drift between two sessions, and the decision at --tolerance. Exit "
                    "status 1 where a case of NEW is slower beyond it.")
    compare.add_argument("new", metavar="NEW", help="the results judged (--dlperf-json)")
    compare.add_argument("old", metavar="OLD", help="the results judged against")
    compare.add_argument("--tolerance", type=float, default=baseline_mod.DEFAULT_TOLERANCE,
                         help="the slowdown that counts, as a fraction (default %(default)s)")
    compare.set_defaults(func=cmd_compare)
    bmf = commands.add_parser(
        "bmf", help="write a results file in the Bencher Metric Format",
        description="Write a --dlperf-json results file as Bencher Metric Format JSON (https://bencher.dev): each "
                    "case a benchmark named by its id, its throughput with its interval, and a multi-GPU case's "
                    "scaling efficiency. For bencher run --adapter json --file PATH.")
    bmf.add_argument("results", metavar="RESULTS", help="the session results (--dlperf-json)")
    bmf.add_argument("-o", "--output", metavar="PATH", help="write it here (default: stdout)")
    bmf.set_defaults(func=cmd_bmf)


def add_reading_commands(commands) -> None:
    """``dlperf report`` and ``dlperf plot``."""
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



def add_dataset_command(commands) -> None:
    """``dlperf dataset``."""
    dataset = commands.add_parser("dataset", help="write a small JPEG ImageFolder for smoke runs",
                                  description="Write random JPEG images in the ImageFolder layout "
                                              "(DIR/class0/0.jpg, ...), for --dlperf-data-dir smoke runs "
                                              "of the torchvision and DALI backends without ImageNet.")
    dataset.add_argument("dir", metavar="DIR", nargs="?", help="a new or empty folder")
    dataset.add_argument("--out", metavar="DIR", help="the folder, as DIR")
    dataset.add_argument("--classes", type=int, default=4, help="class folders (default 4)")
    dataset.add_argument("--per-class", type=int, default=100, help="images per class (default 100; "
                                                                   "--learnable: of the train split)")
    dataset.add_argument("--learnable", action="store_true",
                         help="a learnable set for convergence cases: classes of distinct colours, shapes and "
                              "textures, PNGs in DIR/train/<class>/ and DIR/val/<class>/")
    dataset.add_argument("--val-per-class", type=int, default=25,
                         help="--learnable: images per class of the val split (default 25)")
    dataset.add_argument("--size", type=int, default=40, help="--learnable: image side in pixels (default 40)")
    dataset.add_argument("--force", action="store_true", help="--learnable: replace a non-empty folder")
    dataset.add_argument("--min-size", type=int, default=64, help="smallest side in pixels (default 64)")
    dataset.add_argument("--max-size", type=int, default=160, help="largest side in pixels (default 160)")
    dataset.set_defaults(func=cmd_dataset)


def add_baseline_commands(commands) -> None:
    """``dlperf baseline validate / diff / update``."""
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
                                            "(or, for a new case, the defaults'), or with other CPU threads than "
                                            "its cpu_threads, are refused with exit status 1 unless --force. "
                                            "Written atomically; nothing is written when either file is "
                                            "invalid.")
    update.add_argument("file", metavar="FILE", help="the baseline to update")
    update.add_argument("--from", dest="results", metavar="RESULTS", required=True, action="append",
                        help="the session results (--dlperf-json); given several times, each case's figure is the "
                             "median of the counted runs of all of them, and the entry keeps them all (a baseline "
                             "that spans several sessions, and so how much the machine varies between them)")
    update.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    update.add_argument("--no-add", action="store_true", help="only update existing entries")
    update.add_argument("--force", action="store_true",
                        help="update even when the results come from other hardware than the baseline's, or "
                             "were measured with other step counts or CPU threads than the entries' (the "
                             "entries then record the results')")
    update.set_defaults(func=cmd_update)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dlperf`` with ``argv`` (default: the command line); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(history_command.routed(sys.argv[1:] if argv is None else argv))
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
