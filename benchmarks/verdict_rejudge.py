"""Judge the sessions ``verdict_quality.py --keep`` kept again, offline, under the plugin's rule as it stands.

A what-if for the verdict, without measuring anything: each kept results document's runs are fed, one
at a time and in their order, to the plugin's own sequential loop
(:func:`pytest_dlperf.gate.sequential.measure_until_decided`) and verdict
(:func:`pytest_dlperf.gate.verdict.judge_evidence`), against the baseline figure the session had and, where
the document names it (``--baseline``), the saved baseline's own runs.  A replay cannot measure more
runs than the session did: a case the kept runs leave undecided is counted as inconclusive.

``--tolerance T`` (one or more, comma-separated) judges them at another tolerance than the one they
ran with (the GPU check judges at 3%; a user's default is 5%).

It prints, for each tolerance, each kind's sessions that failed, ended inconclusive and passed, how many
runs they took, and how many replayed verdicts agree with the recorded ones (sessions recorded under an
older rule differ where the rule changed).

    python benchmarks/verdict_rejudge.py benchmarks/gpu-runs/2026-11-26-h200/verdict-sessions \\
        --baseline benchmarks/gpu-runs/2026-11-26-h200/verdict-baseline.json --tolerance 0.03,0.05
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from pytest_dlperf.gate import sequential
from pytest_dlperf.gate.verdict import judge_evidence
from pytest_dlperf.gate.figures import MAX_BANDWIDTH_DROP, MAX_CORE_DROP
from pytest_dlperf.options import probe_drop
from pytest_dlperf.results.case import Expected
from pytest_dlperf.results.runs import Attempt, RunRecord


def kind_of(path: Path) -> str:
    """``0.05-slowed@3-7.json`` -> ``slowed@3`` (verdict_quality's ``TOLERANCE-KIND-N.json``)."""
    return path.stem.split("-")[1]


def rejudge(document: dict, tolerance: float | None = None, baseline_runs: tuple[float, ...] = (),
            probe_runs: dict[str, list[float]] | None = None) -> tuple[str, int]:
    """The verdict ('fail', 'inconclusive', 'pass', 'improved') of the document's one case, replayed, and its runs.

    ``baseline_runs``, ``probe_runs``: the saved baseline's runs and its runs' host probe readings, as the
    plugin pools them."""
    verdict, runs = replay(document, tolerance, baseline_runs, probe_runs)
    status = verdict.status.value
    return ("inconclusive" if verdict.undecided and status != "fail" else status), runs


def replay(document: dict, tolerance: float | None = None, baseline_runs: tuple[float, ...] = (),
           probe_runs: dict[str, list[float]] | None = None):
    """The :class:`~pytest_dlperf.results.judgement.Judgement` of the document's one case, replayed,
    and its runs (:func:`rejudge`'s arguments)."""
    case = document["cases"][0]
    options = document["options"]
    base = case["baseline"]
    tol = base["tolerance"] if tolerance is None else tolerance
    expected = Expected(base["throughput"], base.get("unit") or case["unit"], tol, base.get("source"),
                        memory_gbs=base.get("memory_gbs"), core_gflops=base.get("core_gflops"))
    runs = [RunRecord.from_dict(run, position) for position, run in enumerate(case["attempts"][-1]["runs"])]
    # The host probes' drops as the plugin sets them (on for the CPU, off on GPUs): they name notes only.
    device = (case.get("device") or {}).get("type") or options.get("device") or "cpu"
    drops = {"bandwidth": probe_drop(MAX_BANDWIDTH_DROP, device), "core": probe_drop(MAX_CORE_DROP, device)}
    # The looks the session planned (its --dlperf-max-runs), its kept runs being all a replay can take.
    budget = sequential.Budget(first_runs=options["runs"], max_runs=len(runs), planned=options.get("max_runs"),
                               max_interference=options.get("max_interference"),
                               max_bandwidth_drop=drops["bandwidth"], max_core_drop=drops["core"])
    attempt, evidence = sequential.measure_until_decided(
        lambda index: Attempt.from_runs([runs[index]], case["unit"], case.get("device") or {}),
        expected, baseline_runs, budget, sleep=lambda seconds: None, probe_runs=probe_runs)
    return judge_evidence(case["id"], evidence, case["unit"], expected), len(attempt.runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders of verdict_quality --keep")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="the saved baseline the sessions ran against: its entry's runs are pooled as the "
                             "plugin pools them, and its runs' host probes read as it reads them (the results "
                             "keep its figure, not its runs)")
    parser.add_argument("--tolerance", default=None,
                        help="tolerances to judge at, comma-separated (default: each session's own)")
    opts = parser.parse_args(argv)
    paths = sorted(p for folder in opts.folders for p in folder.glob("*.json"))
    if not paths:
        print(f"verdict_rejudge: no results documents in {', '.join(map(str, opts.folders))}", file=sys.stderr)
        return 2
    own: tuple[float, ...] = ()
    probes: dict[str, list[float]] | None = None
    if opts.baseline is not None:
        entry = json.loads(opts.baseline.read_text())["cases"][0]
        own = tuple(entry.get("runs") or ())
        probes = entry.get("probe_runs")
    documents = {p: json.loads(p.read_text()) for p in paths}
    tolerances = [None] if opts.tolerance is None else [float(t) for t in opts.tolerance.split(",")]
    for tolerance in tolerances:
        table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        agree = 0
        for path, document in documents.items():
            status, runs = rejudge(document, tolerance, own, probes)
            row = table[kind_of(path)]
            row["sessions"] += 1
            row["runs"] += runs
            row["fail" if status == "fail" else "inconclusive" if status == "inconclusive" else "passed"] += 1
            recorded = document["cases"][0]["verdict"]
            agree += recorded == status or (recorded in ("pass", "improved") and status in ("pass", "improved"))
        at = "each session's own tolerance" if tolerance is None else f"tolerance {tolerance:g}"
        print(f"{at}, baseline runs pooled: {len(own)}: {agree} of {len(documents)} verdicts as recorded")
        print(f"  {'kind':<12} | sessions | failed | inconclusive | passed | mean runs")
        for kind, row in sorted(table.items()):
            print(f"  {kind:<12} | {row['sessions']:8d} | {row['fail']:6d} | {row['inconclusive']:12d} | "
                  f"{row['passed']:6d} | {row['runs'] / row['sessions']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
