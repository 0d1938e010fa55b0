"""The history site at a fleet's size: build time, and how fast its pages open in a browser.

The claim (issue 30): a site of 200 cases x 365 nights builds in seconds, and its overview opens in
under two seconds in the browser.  This script writes a SQLite store of ``--cases`` synthetic cases
(on four machine classes) over ``--nights`` nightly sessions (a third of the cases with a step of
5-8% somewhere, one night in 40 inconclusive and one in 60 busy, scaling efficiency and MFU on the
multi-GPU cases), then times, each ``--repeats`` times:

* ``read``: reading every point back (``Store.points``);
* ``analyze``: every case's nights, trend, change points and drift (``dashboard.case_views``, on
  ``--workers`` processes; default one per CPU);
* ``write``: rendering and writing the site (``html.write_site``);

and, in headless Chromium (Debian's, as the tests start it: tests/browser.py), opens the overview
and the case page with the most change points ``--loads`` times each, from ``file://``, printing
the median and the slowest of: DOMContentLoaded, the load event, and *ready* (the page's own script
done: the overview's rows filtered and sorted, or every Plotly chart drawn), all from navigation
start.  It ends with PASS / FAIL for the overview's slowest *ready* against ``--limit`` (2 s).
Exit status 0 pass, 1 fail, 2 no browser.

    python benchmarks/history_site.py                    # 200 x 365, about a minute on 2 cores
    python benchmarks/history_site.py --cases 20 --nights 60 --loads 3
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_dlperf.history import dashboard, html  # noqa: E402
from pytest_dlperf.history.records import CaseRow, SessionRow  # noqa: E402
from pytest_dlperf.history.store import open_store  # noqa: E402

MACHINES = ("8 x NVIDIA H100 80GB HBM3", "8 x NVIDIA A100-SXM4-80GB", "1 x NVIDIA L4", "AMD EPYC, 2 CPUs")
MODELS = (("resnet50", "img/s", 5000.0), ("vit_b_16", "img/s", 1200.0), ("bert-base", "seq/s", 900.0),
          ("gpt2", "tok/s", 60000.0), ("resnet18", "img/s", 9000.0))


def cases(count: int) -> list[tuple[str, str, dict, str, float]]:
    """``count`` cases: (machine, id, case, unit, level), spread over the machine classes."""
    out = []
    n = 0
    while len(out) < count:
        machine = MACHINES[n % len(MACHINES)]
        model, unit, level = MODELS[(n // len(MACHINES)) % len(MODELS)]
        precision = ("amp", "bf16", "fp32")[(n // 20) % 3]
        batch = (64, 128, 256)[(n // 60) % 3]
        gpus = 1 if machine.startswith(("1 x", "AMD")) else (1, 8)[(n // 7) % 2]
        case_id = f"{model}-{precision}-bs{batch}-gpu{gpus}-v{n // 180}"
        out.append((machine, case_id, {"model": model, "precision": precision, "batch_size": batch, "gpus": gpus,
                                       "settings": {}}, unit, level * (1 + 0.1 * (n % 5))))
        n += 1
    return out


def write_store(url: str, count: int, nights: int, seed: int = 30) -> int:
    rng = np.random.default_rng(seed)
    chosen = cases(count)
    series = {}
    for n, (machine, case_id, _, _, level) in enumerate(chosen):
        figures = level * (1 + 0.015 * rng.standard_normal(nights))
        if n % 3 == 0:
            at = int(rng.integers(nights // 4, nights - 20))
            figures[at:] *= 1 - rng.uniform(0.05, 0.08)
        series[(machine, case_id)] = figures
    start = _dt.datetime(2025, 11, 1, 2, 0, tzinfo=_dt.timezone.utc)
    rows = 0
    with open_store(url) as store:
        for night in range(nights):
            for m, machine in enumerate(MACHINES):
                torch = "2.14.1" if night >= nights // 2 else "2.13.0"
                session = SessionRow(id=f"{night:04d}-{m}", created=(start + _dt.timedelta(days=night, minutes=m))
                                     .isoformat(timespec="microseconds"), machine=machine, hostname=f"node{m}",
                                     gpu=machine.split(" x ")[-1] if " x " in machine else None, torch=torch,
                                     git_commit=f"{night:07x}" + "0" * 33, git_branch="main")
                batch = []
                for case_machine, case_id, case, unit, level in chosen:
                    if case_machine != machine:
                        continue
                    figure = float(series[(machine, case_id)][night])
                    verdict = "fail" if figure < 0.95 * level else "pass"
                    busy = None
                    if (night + len(case_id)) % 40 == 0:
                        verdict = "inconclusive"
                    elif (night + len(case_id)) % 60 == 1:
                        verdict, busy = "inconclusive", "other processes used 150% CPU"
                    gpus = case["gpus"]
                    batch.append(CaseRow(case_id, case, unit, figure, (figure * 0.99, figure, figure * 1.01), verdict,
                                         level, 0.05, message=f"{case_id}: {figure:,.1f} {unit} ({verdict})",
                                         busy=busy, busy_runs=1 if busy else 0,
                                         scaling_efficiency=0.9 if gpus > 1 else None,
                                         mfu=0.4 if machine.startswith("8 x") else None))
                store.append(session, batch)
                rows += len(batch)
    return rows


def timed(action):
    started = time.perf_counter()
    out = action()
    return out, time.perf_counter() - started


def page_times(driver, path: Path, loads: int) -> dict[str, list[float]]:
    """Seconds from navigation start to DOMContentLoaded, load and the page's own 'dlperf-ready' mark."""
    from tests.browser import Page

    out: dict[str, list[float]] = {"domcontentloaded": [], "load": [], "ready": []}
    page = Page(driver, "bench")
    for _ in range(loads):
        driver.get("about:blank")
        page.open(path, timeout=60)
        page.wait("performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        nav = page.js("const n = performance.getEntriesByType('navigation')[0]; "
                      "const r = performance.getEntriesByName('dlperf-ready')[0]; "
                      "return [n.domContentLoadedEventEnd, n.loadEventEnd, r ? r.startTime : null];")
        for key, value in zip(out, nav):
            out[key].append(value / 1000)
        errors = page.errors()
        if errors:
            raise SystemExit(f"{path}: console errors: {errors}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--limit", type=float, default=2.0, help="the overview's slowest 'ready', seconds")
    parser.add_argument("--keep", metavar="DIR", help="keep the site here")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dlperf-site-bench-"))
    try:
        url = f"sqlite:///{folder / 'history.db'}"
        rows, seconds = timed(lambda: write_store(url, args.cases, args.nights))
        print(f"store: {args.cases} cases x {args.nights} nights on {len(MACHINES)} machine classes, {rows:,} rows "
              f"({seconds:.1f} s to write); {os.cpu_count()} CPU(s), analysis workers "
              f"{args.workers or os.cpu_count()}")
        times: dict[str, list[float]] = {"read": [], "analyze": [], "write": [], "total": []}
        site = folder / "site"
        for _ in range(args.repeats):
            with open_store(url) as store:
                points, read = timed(store.points)
            views, analyze = timed(lambda: dashboard.case_views(points, workers=args.workers))
            summary, write = timed(lambda: html.write_site(views, site, store=url, sessions=args.nights * 4))
            for key, value in zip(times, (read, analyze, write, read + analyze + write)):
                times[key].append(value)
        for key, values in times.items():
            print(f"build {key:8s} median {statistics.median(values):6.2f} s   slowest {max(values):6.2f} s")
        size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        busiest = max(views, key=lambda v: (len(v.history.change_points) if v.history else 0, len(v.nights)))
        case_path = site / "cases" / f"{busiest.key}.html"
        print(f"site: {summary.cases} case pages, {size / 1e6:.1f} MB in all (plotly.min.js "
              f"{(site / 'assets' / 'plotly.min.js').stat().st_size / 1e6:.1f} MB); index.html "
              f"{(site / 'index.html').stat().st_size / 1e3:.0f} kB; {busiest.case_id} ({len(busiest.nights)} nights, "
              f"{len(busiest.history.change_points) if busiest.history else 0} change points) "
              f"{case_path.stat().st_size / 1e3:.0f} kB")
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(site, args.keep)
        chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
        if not (chromium and driver_path):
            print("no chromium / chromedriver: bash .ci/install-browser; page load times not measured")
            return 2
        from tests.browser import start_chromium

        profile = tempfile.mkdtemp(prefix="dlperf-chromium-")
        driver = start_chromium(chromium, driver_path, profile)
        try:
            loads = {"overview": page_times(driver, site / "index.html", args.loads),
                     "case page": page_times(driver, case_path, args.loads)}
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
        for name, found in loads.items():
            for key, values in found.items():
                print(f"{name:9s} {key:16s} median {statistics.median(values):5.2f} s   slowest {max(values):5.2f} s "
                      f"({len(values)} loads)")
        slowest = max(loads["overview"]["ready"])
        verdict = "PASS" if slowest <= args.limit else "FAIL"
        print(f"{verdict}: the overview of {args.cases} cases is ready in at most {slowest:.2f} s "
              f"(limit {args.limit:.1f} s); the build took {statistics.median(times['total']):.1f} s")
        return 0 if verdict == "PASS" else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
