"""What --dlperf-history adds to a session: the end-of-session write, side by side with and without analysis.

The claim (issue 13): writing history adds under 1 s to a session.  This script runs the very
code a session runs at its end (``pytest_dlperf.controller.history.record``) on the typed results of a
session of ``--cases`` cases (the CPU suite's size by default), into a SQLite store that already
holds ``--sessions`` sessions of them (a year of nightly runs by default), and, with
``--postgres URL``, into a PostgreSQL store too.  Each store is timed ``--repeats`` times in
each of two modes, alternating:

* ``write``: append the session's rows (``--dlperf-history`` alone);
* ``write+analyze``: append, read back each case's history on this machine class and find its
  change points, trend and newest step (``--dlperf-report`` or ``--dlperf-history-gate`` too).

It prints the median and the slowest of each mode and store, and PASS / FAIL against ``--limit``
(default 1 s) for the slowest ``write``, the claim; ``write+analyze`` is printed beside it (its first
repeat includes importing scipy and ruptures).  Exit status 0 pass, 1 fail.

    python benchmarks/history_overhead.py
    python benchmarks/history_overhead.py --postgres postgresql://dlperf@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_dlperf import environment
from pytest_dlperf.cases import Case
from pytest_dlperf.controller import history as hooks
from pytest_dlperf.history.records import case_rows, session_row
from pytest_dlperf.history.store import open_store
from pytest_dlperf.results.case import CaseResult, Status
from pytest_dlperf.results.runs import AttemptRecord, RunRecord, RunStatus


def session_results(cases: int, figure: float) -> list[CaseResult]:
    """A measured session's typed results: ``cases`` cases, one run of 5 windows each."""
    out = []
    for n in range(cases):
        windows = [{"steps": 50, "seconds": 1.0, "samples": 32, "throughput": figure * (1 + 0.01 * k)}
                   for k in range(5)]
        out.append(CaseResult(id=f"tiny-fp32-bs{8 * (n + 1)}-gpu1", case=Case("tiny", "fp32", 8 * (n + 1), 1),
                              unit="img/s", verdict=Status.PASS, throughput=figure,
                              attempts=[AttemptRecord(figure, [RunRecord(0, RunStatus.OK, windows=windows)])]))
    return out


def seed(url: str, env: dict, results: list[CaseResult], sessions: int) -> None:
    start = _dt.datetime(2025, 11, 1, tzinfo=_dt.timezone.utc)
    with open_store(url) as store:
        for i in range(sessions):
            store.append(session_row(env, "cpu", created=start + _dt.timedelta(days=i)), case_rows(results))


def run(url: str, env: dict, results: list[CaseResult], analyze: bool) -> float:
    options = types.SimpleNamespace(history_url=url, device="cpu")
    started = time.perf_counter()
    hooks.record(options, "cpu", results, env, {}, analyze=analyze)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.0)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL database to time beside SQLite")
    args = parser.parse_args()
    env = environment.collect(Path.cwd())
    results = session_results(args.cases, 1000.0)
    with tempfile.TemporaryDirectory() as folder:
        stores = {"sqlite": f"sqlite:///{Path(folder) / 'history.db'}"}
        if args.postgres:
            stores["postgresql"] = args.postgres
        for name, url in stores.items():
            seed(url, env, results, args.sessions)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats):
            for name, url in stores.items():
                for mode, analyze in (("write", False), ("write+analyze", True)):
                    times.setdefault((name, mode), []).append(run(url, env, results, analyze))
    print(f"history at the end of a session of {args.cases} case(s), into a store of {args.sessions}+ sessions, "
          f"{args.repeats} repeats each")
    worst = 0.0
    for (name, mode), seconds in times.items():
        worst = max(worst, max(seconds)) if mode == "write" else worst
        print(f"  {name:10s} {mode:14s} median {statistics.median(seconds):6.3f} s   slowest {max(seconds):6.3f} s")
    verdict = "PASS" if worst < args.limit else "FAIL"
    print(f"{verdict}: slowest write {worst:.3f} s against a limit of {args.limit:.1f} s")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
