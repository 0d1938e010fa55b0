"""The verdict's operating characteristic: how often it fails, at each true slowdown, under a known noise.

``verdict_quality.py`` measures the gate with real sessions on a real, drifting machine; this
script measures the statistical procedure alone, where the truth is known.  Each trial draws a
baseline of ``--baseline-runs`` runs and a session's runs from log-normal noise with the
coefficient of variation ``--cv`` (between fresh runs: 5% on the project's 2-core VMs, 1-2% within
one run), the session's runs at ``--ratios`` of the baseline's true figure, and feeds them one at a
time to the plugin's own loop and verdict (:func:`pytest_dlperf.gate.sequential.measure_until_decided`,
:func:`pytest_dlperf.gate.verdict.judge_evidence`), as ``--dlperf-baseline`` with a saved baseline and
``--dlperf-max-runs`` would.  It prints, per noise and true ratio, the share of trials that failed
(a regression, or, under ``--inconclusive below``, inconclusive below the threshold: "not confirmed"),
ended inconclusive and not failed,
passed or improved, and the mean runs per verdict.

At a ratio of 1.00 the failed share is the false-alarm rate of a machine whose noise is exactly
``--cv`` (no drift between the baseline's hour and the session's: ``verdict_quality.py`` has that);
at ``1 - tolerance`` it is the threshold's own coin; below, the detection rate.

    python benchmarks/verdict_simulation.py --cv 0.02,0.05,0.07 --trials 2000
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from pytest_dlperf.gate import sequential
from pytest_dlperf.gate.verdict import judge_evidence
from pytest_dlperf.results.case import Expected
from pytest_dlperf.results.runs import Attempt, RunRecord, RunStatus

RATIOS = "1.0,0.98,0.97,0.96,0.95,0.94,0.93,0.90,0.85,0.80,1.10"


def trial(rng: np.random.Generator, cv: float, ratio: float, tolerance: float, baseline_runs: int,
          budget: sequential.Budget, inconclusive: str) -> tuple[str, int, bool]:
    """One session against one saved baseline: its verdict ('fail', 'inconclusive', 'pass'), its runs, and
    whether it failed inconclusive ("not confirmed": the estimate below the threshold at the budget)."""
    sigma = math.sqrt(math.log(1 + cv * cv))  # the log-normal whose coefficient of variation is cv
    base_runs = np.exp(rng.normal(0.0, sigma, baseline_runs)) * 1000.0
    # A saved baseline's figure is the median of its runs (baseline.from_measurements), and it keeps them.
    expected = Expected(float(np.median(base_runs)), "img/s", tolerance, "simulated")
    session = np.exp(rng.normal(math.log(ratio), sigma, budget.max_runs)) * 1000.0

    def one(index: int) -> Attempt:
        return Attempt.from_runs([RunRecord(index, RunStatus.OK, windows=[{"throughput": float(session[index])}])],
                                 "img/s", {})

    attempt, evidence = sequential.measure_until_decided(one, expected, [float(v) for v in base_runs], budget,
                                                         sleep=lambda seconds: None)
    verdict = judge_evidence("sim", evidence, "img/s", expected, inconclusive=inconclusive)
    status = "fail" if verdict.status.value == "fail" else "inconclusive" if verdict.inconclusive else "pass"
    return status, len(attempt.runs), status == "fail" and verdict.inconclusive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cv", default="0.02,0.05", help="noise between runs, comma-separated (0.02,0.05)")
    parser.add_argument("--ratios", default=RATIOS, help=f"true figure over the baseline's ({RATIOS})")
    parser.add_argument("--tolerance", type=float, default=0.05, help="the baseline's tolerance (0.05)")
    parser.add_argument("--baseline-runs", type=int, default=10,
                        help="runs the saved baseline kept (10: what --dlperf-save-baseline measures)")
    parser.add_argument("--first-runs", type=int, default=1, help="--dlperf-runs (1)")
    parser.add_argument("--max-runs", type=int, default=10, help="--dlperf-max-runs (10)")
    parser.add_argument("--inconclusive", default="pass", choices=("below", "fail", "pass"),
                        help="--dlperf-inconclusive (pass)")
    parser.add_argument("--trials", type=int, default=2000, help="trials per noise and ratio (2000)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (0)")
    opts = parser.parse_args(argv)
    try:
        cvs = [float(v) for v in opts.cv.split(",")]
        ratios = [float(v) for v in opts.ratios.split(",")]
    except ValueError as exc:
        parser.error(f"--cv, --ratios: comma-separated numbers: {exc}")
    if opts.trials < 1 or opts.max_runs < opts.first_runs or opts.first_runs < 1 or opts.baseline_runs < 1:
        parser.error("--trials, --first-runs, --baseline-runs: at least 1; --max-runs: at least --first-runs")
    budget = sequential.Budget(first_runs=opts.first_runs, max_runs=opts.max_runs)
    rng = np.random.default_rng(opts.seed)
    started = time.monotonic()
    print(f"tolerance {100 * opts.tolerance:g}%, baseline of {opts.baseline_runs} runs, --dlperf-runs "
          f"{opts.first_runs}, --dlperf-max-runs {opts.max_runs}, --dlperf-inconclusive {opts.inconclusive}, "
          f"{opts.trials} trials each (seed {opts.seed})")
    print("  cv | ratio | failed | of them not confirmed | inconclusive, passed | passed or improved | mean runs")
    print("-----+-------+--------+-----------------------+----------------------+--------------------+----------")
    for cv in cvs:
        for ratio in ratios:
            counts = {"fail": 0, "inconclusive": 0, "pass": 0}
            unconfirmed = runs = 0
            for _ in range(opts.trials):
                status, used, unsure = trial(rng, cv, ratio, opts.tolerance, opts.baseline_runs, budget,
                                             opts.inconclusive)
                counts[status] += 1
                runs += used
                unconfirmed += unsure
            share = {k: 100 * v / opts.trials for k, v in counts.items()}
            print(f"{100 * cv:3.0f}% | {ratio:5.2f} | {share['fail']:5.1f}% | {100 * unconfirmed / opts.trials:20.1f}% "
                  f"| {share['inconclusive']:19.1f}% | {share['pass']:17.1f}% | {runs / opts.trials:9.2f}")
    print(f"failed: a regression (or, under --inconclusive below, inconclusive with the estimate below the "
          f"threshold); 'of them not confirmed': failed inconclusive at the budget; {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
