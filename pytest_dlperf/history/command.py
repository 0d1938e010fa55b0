"""``dlperf history URL``: each case's trend and change points, with what changed at each; ``--plot DIR``.
``dlperf history import URL RESULTS...`` and ``dlperf history export URL --csv/--json FILE`` (:mod:`.exchange`).

Exit status as the other ``dlperf`` commands: 0 when no case's newest figures start a
significant downward step, 1 when one does (what ``--dlperf-history-gate`` fails a session for),
2 for trouble: a store that cannot be read, an unknown URL scheme, no matplotlib for ``--plot``.
Import and export: 0 done, 2 for a file that cannot be read or is invalid, or a store or output that fails.

The parser knows import and export as the subcommands ``history import`` and ``history export``, one name each,
which :func:`routed` makes of the two words typed: ``dlperf history URL`` stays as it was, and ``dlperf --help``
lists the three.  (A SQLite file named ``import`` or ``export`` is given as ``./import``.)
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..atomic import check_output
from . import analysis, changepoints, dashboard, exchange, text
from .store import SQLiteStore, Store, StoreError, store_for

URL_HELP = "sqlite:///PATH, a path, or postgresql://USER@HOST/DB"
#: ``dlperf history ACTION``: the actions typed after ``history`` in place of its URL.
ACTIONS = ("import", "export")


def routed(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``history import`` (``export``) as the one subcommand name the parser knows it by."""
    if len(argv) >= 2 and argv[0] == "history" and argv[1] in ACTIONS:
        return [f"history {argv[1]}", *argv[2:]]
    return list(argv)


def add_parser(commands) -> None:
    """The ``history`` subcommand, on the ``dlperf`` parser's subparsers."""
    history = commands.add_parser(
        "history", help="trends and change points of every case in a history store",
        description="Print, per case and machine class, the last figures of a --dlperf-history store and the "
                    "change points in them (E-divisive: ruptures' binary segmentation with a permutation test): "
                    "the size of each step with its 95%% interval, the first session after it and what changed "
                    "across it (torch, CUDA, cuDNN, NCCL, driver, git commit). Exit 0; 1 when a case's newest "
                    "figures start a significant downward step; 2 when the store cannot be read.",
        epilog="dlperf history import URL RESULTS... appends results files; dlperf history export URL --csv FILE "
               "writes the nights (their --help).")
    history.add_argument("url", metavar="URL", help=URL_HELP)
    _add_selection(history)
    history.add_argument("--last", metavar="N", type=int, help="only each case's last N sessions")
    history.add_argument("--alpha", metavar="P", type=float, default=changepoints.ALPHA,
                         help=f"significance level of a change point (default {changepoints.ALPHA})")
    history.add_argument("--plot", metavar="DIR", help="draw each case's figures with its change points as PNGs")
    history.add_argument("--html", metavar="DIR",
                         help="write the history as a static site into DIR (created; a site written before is "
                              "replaced): an overview of every case and a page per case, with Plotly charts; it opens "
                              "from file:// with no server and no network")
    history.add_argument("--link", metavar="LABEL=PATTERN", action="append", default=[],
                         help="with --html, link each night to what it kept: a URL or a path with placeholders "
                              f"{', '.join('{' + p + '}' for p in dashboard.PLACEHOLDERS)} (repeatable), e.g. "
                              "report=nights/{session}/report.md; a path is linked where its file exists")
    history.set_defaults(func=cmd_history)
    add_exchange_parsers(commands)


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", metavar="PATTERN", action="append",
                        help="only cases whose id matches this shell pattern (repeatable)")
    parser.add_argument("--machine", metavar="TEXT", help="only machine classes whose name contains TEXT")


def add_exchange_parsers(commands) -> None:
    """``dlperf history import`` and ``dlperf history export`` (:func:`routed`)."""
    imports = commands.add_parser(
        "history import", help="append the sessions of results files to a history store",
        description="Append the session of each RESULTS file (--dlperf-json) to the store, as that session appends "
                    "itself with --dlperf-history, at the file's created time. A file whose session the store "
                    "holds (the same machine class, host, git commit and A/B reference, stored at the file's "
                    f"created time or up to {exchange.SAME_SESSION_SECONDS:.0f} s after it) is not imported again. "
                    "Every file is checked before anything is written, and all are written in one transaction. "
                    "Exit 0; 2 for a file that cannot be read or is not valid (nothing is written) or a store "
                    "that cannot be written.")
    imports.add_argument("url", metavar="URL", help=URL_HELP + " (created on first use)")
    imports.add_argument("results", metavar="RESULTS", nargs="+", help="results files (--dlperf-json)")
    imports.set_defaults(func=cmd_import)
    exports = commands.add_parser(
        "history export", help="write every night of every case in a history store as CSV or JSON",
        description="Write every night of every case in the store (A/B sessions are none), oldest first: its "
                    "machine class, case, time, commit, figure, unit, runs, verdict, baseline, tolerance, verdict "
                    "rules and the rest of its rows, as CSV (a header row, then a row per night) or JSON "
                    "(pytest_dlperf/schemas/history-export.schema.json). Exit 0; 2 when the store cannot be read "
                    "or a file cannot be written.")
    exports.add_argument("url", metavar="URL", help=URL_HELP)
    exports.add_argument("--csv", metavar="FILE", help="write CSV to FILE (-: stdout)")
    exports.add_argument("--json", metavar="FILE", help="write JSON to FILE (-: stdout)")
    _add_selection(exports)
    exports.set_defaults(func=cmd_export)


def _selection(args: argparse.Namespace) -> Callable[[str, str], bool]:
    """Whether ``--case`` and ``--machine`` choose a case of a machine class."""
    def chosen(machine: str, case_id: str) -> bool:
        if args.case and not any(fnmatch.fnmatchcase(case_id, p) for p in args.case):
            return False
        return not (args.machine and args.machine.lower() not in machine.lower())

    return chosen


def _existing(url: str) -> Store:
    """The store of ``url``, not opened; a SQLite file that does not exist is refused (reading never makes one)."""
    store = store_for(url)
    if isinstance(store, SQLiteStore) and not store.path.is_file():
        raise StoreError(f"{store.url}: no such history file (--dlperf-history writes it)")
    return store


def cmd_import(args: argparse.Namespace) -> int:
    url, files = exchange.import_files(args.url, args.results)
    for found, written in files:
        if written:
            print(f"dlperf: {found.path}: imported {len(found.cases)} case(s) of {found.describe()}")
        else:
            print(f"dlperf: {found.path}: {found.describe()} is in the store already; not imported again")
    count = sum(written for _, written in files)
    print(f"dlperf: history import into {url}: {count} session(s) imported, {len(files) - count} in it already")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    targets = [t for t in (args.csv, args.json) if t]
    if not targets:
        raise StoreError("history export: give --csv FILE or --json FILE (-: stdout)")
    if targets.count("-") > 1:
        raise StoreError("history export: --csv and --json cannot both go to stdout (-)")
    for target in targets:
        if target != "-":
            check_output(target)
    with _existing(args.url).open() as store:
        points = store.points()
    chosen = _selection(args)
    points = [p for p in points if chosen(p.session.machine, p.case.case_id)]
    if args.csv:
        exchange.write_export(args.csv, exchange.csv_text(exchange.night(p) for p in points))
    if args.json:
        exchange.write_export(args.json, None, exchange.export_document(store.url, points))
    cases = len({(p.session.machine, p.case.case_id) for p in points})
    for target in targets:
        if target != "-":
            print(f"dlperf: wrote {target} ({len(points)} night(s) of {cases} case(s))",
                  file=sys.stderr if "-" in targets else sys.stdout)
    return 0


def _checked(args: argparse.Namespace) -> list:
    """``dlperf history``'s arguments, checked before the store is read; the site's link patterns."""
    if args.last is not None and args.last < 2:
        raise StoreError(f"--last: {args.last} is not allowed; expected an integer >= 2")
    if not 0 < args.alpha < 1:
        raise StoreError(f"--alpha: {args.alpha} is not allowed; expected a number between 0 and 1")
    missing = changepoints.missing("dlperf history")
    if missing:
        raise StoreError(missing)
    if args.plot:
        from .plot import missing_matplotlib

        missing = missing_matplotlib("dlperf history --plot")
        if missing:
            raise StoreError(missing)
    links = []
    if args.html:
        from . import html

        if missing := html.missing("dlperf history --html"):
            raise StoreError(missing)
        try:
            links = [dashboard.LinkPattern.parse(text_, "--link") for text_ in args.link]
            html.check_target(Path(args.html))
        except (dashboard.LinkError, html.SiteError) as exc:
            raise StoreError(f"--html: {exc}" if isinstance(exc, html.SiteError) else str(exc)) from None
    elif args.link:
        raise StoreError("--link: links are written into the site: give --html DIR too")
    return links


def cmd_history(args: argparse.Namespace) -> int:
    links = _checked(args)
    with _existing(args.url).open() as store:
        points = store.points()
        url = store.url
    chosen = _selection(args)
    sessions = len({p.session.id for p in points})
    views = None
    if args.html:  # the site's analysis is the text's too: each case's trend is worked out once
        views = dashboard.case_views(points, alpha=args.alpha, links=links, last=args.last, select=chosen)
        histories = [v.history for v in views if v.history is not None and v.measure.key == "throughput"]
    else:
        selected = [group[-args.last:] if args.last else group
                    for (machine, case_id), group in sorted(analysis.series(points).items())
                    if chosen(machine, case_id)]
        histories = [analysis.analyze(group, alpha=args.alpha) for group in selected]
    print(f"dlperf history {url}: {sessions} session(s), {len(histories)} case(s) on "
          f"{len({h.machine for h in histories})} machine class(es)")
    for history in histories:
        print()
        print("\n".join(text.case_lines(history)))
    if args.plot:
        from .plot import write_plots

        written = write_plots(histories, Path(args.plot))
        print(f"\ndlperf: {len(written)} plot(s) in {Path(args.plot).resolve()}")
    if views is not None:
        from . import html

        try:
            site = html.write_site(views, args.html, store=url, sessions=sessions)
        except html.SiteError as exc:
            raise StoreError(f"--html: {exc}") from None
        print(f"\ndlperf: history site of {site.cases} case(s) on {site.machines} machine class(es) in "
              f"{site.index} ({site.seconds:.1f} s)")
    return 1 if any(h.newest_step is not None for h in histories) else 0
