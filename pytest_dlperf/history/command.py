"""``dlperf history URL``: each case's trend and change points, with what changed at each; ``--plot DIR``.

Exit status as the other ``dlperf`` commands: 0 when no case's newest figures start a
significant downward step, 1 when one does (what ``--dlperf-history-gate`` fails a session for),
2 for trouble: a store that cannot be read, an unknown URL scheme, no matplotlib for ``--plot``.
"""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

from . import analysis, changepoints, text
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
    history.set_defaults(func=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    if args.last is not None and args.last < 2:
        raise StoreError(f"--last: {args.last} is not allowed; expected an integer >= 2")
    if not 0 < args.alpha < 1:
        raise StoreError(f"--alpha: {args.alpha} is not allowed; expected a number between 0 and 1")
    missing = changepoints.missing("dlperf history")
    if missing:
        raise StoreError(missing)
    if args.plot:
        from ..reporting import plots

        missing = plots.missing_matplotlib("dlperf history --plot")
        if missing:
            raise StoreError(missing)
    store = store_for(args.url)
    if isinstance(store, SQLiteStore) and not store.path.is_file():
        raise StoreError(f"{store.url}: no such history file (--dlperf-history writes it)")
    with store.open():
        points = store.points()
        url = store.url
    groups = analysis.series(points)
    selected = []
    for (machine, case_id), group in sorted(groups.items()):
        if args.case and not any(fnmatch.fnmatchcase(case_id, p) for p in args.case):
            continue
        if args.machine and args.machine.lower() not in machine.lower():
            continue
        selected.append(group[-args.last:] if args.last else group)
    histories = [analysis.analyze(group, alpha=args.alpha) for group in selected]
    sessions = len({p.session.id for p in points})
    print(f"dlperf history {url}: {sessions} session(s), {len(histories)} case(s) on "
          f"{len({h.machine for h in histories})} machine class(es)")
    for history in histories:
        print()
        print("\n".join(text.case_lines(history)))
    if args.plot:
        from .plot import write_plots

        written = write_plots(histories, Path(args.plot))
        print(f"\ndlperf: {len(written)} plot(s) in {Path(args.plot).resolve()}")
    return 1 if any(h.newest_step is not None for h in histories) else 0
