"""``dlperf history URL``: each case's trend and change points, with what changed at each; ``--plot DIR``.

Exit status as the other ``dlperf`` commands: 0 when no case's newest figures start a
significant downward step, 1 when one does (what ``--dlperf-history-gate`` fails a session for),
2 for trouble: a store that cannot be read, an unknown URL scheme, no matplotlib for ``--plot``.
"""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

from . import analysis, changepoints, dashboard, text
from .store import SQLiteStore, StoreError, store_for


def add_parser(commands) -> None:
    """The ``history`` subcommand, on the ``dlperf`` parser's subparsers."""
    history = commands.add_parser(
        "history", help="trends and change points of every case in a history store",
        description="Print, per case and machine class, the last figures of a --dlperf-history store and the "
                    "change points in them (E-divisive: ruptures' binary segmentation with a permutation test): "
                    "the size of each step with its 95%% interval, the first session after it and what changed "
                    "across it (torch, CUDA, cuDNN, NCCL, driver, git commit). Exit 0; 1 when a case's newest "
                    "figures start a significant downward step; 2 when the store cannot be read.")
    history.add_argument("url", metavar="URL", help="sqlite:///PATH, a path, or postgresql://USER@HOST/DB")
    history.add_argument("--case", metavar="PATTERN", action="append",
                         help="only cases whose id matches this shell pattern (repeatable)")
    history.add_argument("--machine", metavar="TEXT", help="only machine classes whose name contains TEXT")
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
    store = store_for(args.url)
    if isinstance(store, SQLiteStore) and not store.path.is_file():
        raise StoreError(f"{store.url}: no such history file (--dlperf-history writes it)")
    with store.open():
        points = store.points()
        url = store.url

    def chosen(machine: str, case_id: str) -> bool:
        if args.case and not any(fnmatch.fnmatchcase(case_id, p) for p in args.case):
            return False
        return not (args.machine and args.machine.lower() not in machine.lower())

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
