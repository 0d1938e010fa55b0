"""Judge the sessions ``verdict_quality.py --keep`` kept again, offline, under another rule.

A what-if for the verdict, without measuring anything: each kept results document's runs are
fed, one at a time and in their order, to the plugin's own sequential loop
(:func:`pytest_dlperf.sequential.measure_until_decided`) and verdict
(:func:`pytest_dlperf.verdict.judge_evidence`), against the baseline figure the session had.
``--core-gain K`` (one or more, comma-separated) tries one rule the plugin does not have: a run
whose core probe read more than ``--gain-above`` above the baseline's counts at its figure times
``(baseline core / run core) ** K``, as if the host had run it no faster than in the baseline's
minute (K = 0: the plugin's rule; K = 1: the whole gain; the slope of log img/s on log GFLOP/s
measured on a 2-core VM was 0.72-0.86, benchmarks/README.md).

``--memory-slope S`` (one or more) tries another: the allowance for a memory probe below the
baseline's is ``(baseline GB/s / run GB/s) ** S`` where the machine was quiet (beside another
process in it, the whole ratio, as in the plugin). The plugin's S is HostProbe.slope, 0.5, the most
a case's throughput was measured to follow the probe; before 2026-11-25 it was S = 1.

It prints, for each K and S, each kind's sessions that failed, ended inconclusive and passed, and how
many runs they took, and how many replayed verdicts agree with the recorded ones: compare under
the rule the sessions ran with (K = 0 and S = 0.5 since 2026-11-25, S = 1 before). The results
keep the baseline's figure but not its runs' spread, which the plugin pooled with the session's
own, so a few verdicts near the threshold can differ even then.

    python benchmarks/verdict_rejudge.py vq-results --core-gain 0,0.5,1
    python benchmarks/verdict_rejudge.py vq-results --core-gain 0 --memory-slope 1,0.5
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from pathlib import Path

from pytest_dlperf import evidence as ev
from pytest_dlperf import sequential
from pytest_dlperf.results import Expected
from pytest_dlperf.runs import Attempt
from pytest_dlperf.verdict import judge_evidence


def kind_of(path: Path) -> str:
    """``0.05-slowed@3-7.json`` -> ``slowed@3`` (verdict_quality's ``TOLERANCE-KIND-N.json``)."""
    return path.stem.split("-")[1]


def rejudge(document: dict, core_gain: float, gain_above: float,
            memory_slope: float = ev.MEMORY.slope) -> tuple[str, int]:
    """The verdict ('fail', 'inconclusive', 'pass', 'improved') of the document's one case, replayed."""
    case = document["cases"][0]
    options = document["options"]
    base = case["baseline"]
    expected = Expected(base["throughput"], base.get("unit") or case["unit"], base["tolerance"], base.get("source"),
                        memory_gbs=base.get("memory_gbs"), core_gflops=base.get("core_gflops"))
    runs = case["attempts"][-1]["runs"]
    budget = sequential.Budget(first_runs=options["runs"], max_runs=len(runs),
                               max_interference=options.get("max_interference"),
                               max_bandwidth_drop=options.get("max_bandwidth_drop"),
                               max_core_drop=options.get("max_core_drop"))
    core = expected.core_gflops

    def figures(*args, **kwargs):
        out = ev_run_figures(*args, **kwargs)
        if not core_gain or not core:
            return out
        return [dataclasses.replace(f, value=f.value * (core / f.core) ** core_gain)
                if f.core and f.core > core * (1 + gain_above) else f for f in out]

    # The plugin's own run_figures computes every allowance, with the memory probe's slope replaced.
    ev_run_figures, memory = ev.run_figures, ev.MEMORY
    ev.run_figures, ev.MEMORY = figures, dataclasses.replace(memory, slope=memory_slope)
    try:
        attempt, evidence = sequential.measure_until_decided(
            lambda index: Attempt.from_runs([runs[index]], case["unit"], case.get("device") or {}),
            expected, (), budget, sleep=lambda seconds: None, bandwidth=expected.memory_gbs, core=core)
    finally:
        ev.run_figures, ev.MEMORY = ev_run_figures, memory
    verdict = judge_evidence(case["id"], evidence, case["unit"], expected, inconclusive=options["inconclusive"])
    status = verdict.status.value
    return ("inconclusive" if verdict.inconclusive and status != "fail" else status), len(attempt.runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders of verdict_quality --keep")
    parser.add_argument("--core-gain", default="0,0.5,1", help="exponents K, comma-separated (0,0.5,1)")
    parser.add_argument("--memory-slope", default=f"{ev.MEMORY.slope:g}",
                        help=f"exponents S of the memory probe's allowance, comma-separated (the plugin's: "
                             f"{ev.MEMORY.slope:g}; before 2026-11-25: 1)")
    parser.add_argument("--gain-above", type=float, default=0.0,
                        help="a run's core probe above the baseline's by more than this is corrected (0)")
    opts = parser.parse_args(argv)
    paths = sorted(p for folder in opts.folders for p in folder.glob("*.json"))
    if not paths:
        print(f"verdict_rejudge: no results documents in {', '.join(map(str, opts.folders))}", file=sys.stderr)
        return 2
    documents = {p: json.loads(p.read_text()) for p in paths}
    rules = [(float(k), float(m)) for k in opts.core_gain.split(",") for m in opts.memory_slope.split(",")]
    for gain, slope in rules:
        table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        agree = 0
        for path, document in documents.items():
            status, runs = rejudge(document, gain, opts.gain_above, slope)
            row = table[kind_of(path)]
            row["sessions"] += 1
            row["runs"] += runs
            row["fail" if status == "fail" else "inconclusive" if status == "inconclusive" else "passed"] += 1
            recorded = document["cases"][0]["verdict"]
            agree += recorded == status or (recorded in ("pass", "improved") and status in ("pass", "improved"))
        print(f"core gain K = {gain:g} (runs above the baseline's core by more than {opts.gain_above:.0%}), "
              f"memory slope S = {slope:g}"
              + f": {agree} of {len(documents)} verdicts as recorded")
        print(f"  {'kind':<12} | sessions | failed | inconclusive | passed | mean runs")
        for kind, row in sorted(table.items()):
            print(f"  {kind:<12} | {row['sessions']:8d} | {row['fail']:6d} | {row['inconclusive']:12d} | "
                  f"{row['passed']:6d} | {row['runs'] / row['sessions']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
