"""The verdict's operating characteristic: how often it fails, at each true slowdown, under a known noise and drift.

``verdict_quality.py`` measures the gate with real sessions on a real, drifting machine; this
script measures the statistical procedure alone, where the truth is known.  Each trial draws, on the log
scale (docs/verdicts.md, the model):

* a saved baseline: ``--baseline-runs`` runs of one session, its figure their geometric mean (as
  ``--dlperf-save-baseline`` saves it), its runs kept;
* the session's runs at ``--ratios`` of the baseline's true figure;
* run-to-run noise of coefficient of variation ``--cv``, and a session offset of standard deviation
  ``--offset`` drawn once for the save and once for the session (``u_b``, ``u_s``);
* with ``--history N``, N earlier nights (each its own offset and ``--night-runs`` runs), from which the
  drift between sessions is estimated as the plugin estimates it from a history store
  (:func:`pytest_dlperf.gate.drift.drift`); without, the plugin's prior.

The runs are fed one at a time to the plugin's own loop and verdict
(:func:`pytest_dlperf.gate.sequential.measure_until_decided`, :func:`pytest_dlperf.gate.verdict.judge_evidence`).
It prints, per noise, offset and true ratio, the share of trials that failed, of them "not confirmed" (a
regression at its look's boundary from one run when the budget ended), that ended inconclusive (and did not
fail), that passed or improved, and the mean runs.

``--acceptance`` prints the issue 43 checks instead: false alarms at the tolerance boundary with the looks
(<= 1%), unchanged code with a 5% session offset (<= 2%, with a history of 10 nights), slowdowns of twice the
tolerance at 5% CV caught (>= 90%: failed, failed or flagged inconclusive, or failed within three nights against one
saved baseline, ``dlperf_inconclusive_nights = 3`` failing a third inconclusive night in a row).

    python benchmarks/verdict_simulation.py --cv 0.02,0.05 --offset 0,0.05 --trials 2000
    python benchmarks/verdict_simulation.py --acceptance --trials 4000

``--both-errors`` prints one table of both errors (issue 53), for verdicts against a stored baseline (the prior drift),
with a history of 10 nights, and of pairs (``--dlperf-against``: each pair a run of each side in one session, so
the session's offset reaches both; the plugin's own loop, :func:`pytest_dlperf.ab.pairs.measure_pairs`, with its
default of at most 30 pairs; the candidate's memory probe moved by the change, as a change of its own would move
it), over CV 0.5/2/5% and session offsets 0/2/5%: the share of sessions that FAIL unchanged, and that FAIL, PASS
or end INCONCLUSIVE at a slowdown of the tolerance and of twice it; a row meets the promise where unchanged code
fails at most 1% and twice the tolerance passes at most 1% and fails at least 90%.

    python benchmarks/verdict_simulation.py --both-errors --trials 200
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import sys
import time
from unittest import mock

import numpy as np

from pytest_dlperf.ab.pairs import measure_pairs
from pytest_dlperf.gate import drift as drift_mod
from pytest_dlperf.gate import evidence as evidence_mod
from pytest_dlperf.gate import nights as nights_mod
from pytest_dlperf.gate import paired
from pytest_dlperf.gate import sequential
from pytest_dlperf.gate.evidence import Decision
from pytest_dlperf.gate.figures import RunFigure
from pytest_dlperf.gate.policy import Policy, settle
from pytest_dlperf.gate.verdict import judge_evidence
from pytest_dlperf.results.case import Expected
from pytest_dlperf.results.runs import Attempt, RunRecord, RunStatus

RATIOS = "1.0,0.98,0.97,0.96,0.95,0.94,0.93,0.90,0.85,0.80,1.10"


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a trial draws from: noise, drift, the baseline, the budget and the history."""

    cv: float
    offset: float = 0.0  # sd of a session's offset (the save's and the session's)
    tolerance: float = 0.05
    baseline_runs: int = 10
    budget: sequential.Budget = sequential.Budget()
    inconclusive: str = "pass"
    history: int = 0  # earlier nights in a history store (0: none, the prior)
    night_runs: int = 2
    #: The host's speed in every night over the save's, the controller's probe (a reading after each run, PROBE_CV
    #: apart) simulated on both sides as the plugin reads it; None: no probe (the host never moves).
    host: float | None = None
    #: The nights together judged as measured only, as before 0.8.0 (for the side by side of ``--host``).
    nights_as_measured: bool = False
    #: sd of the host's level over a stretch of seconds to minutes: the save spreads its runs over a minute
    #: (``dlperf_save_span``), each run in a stretch of its own; a session's runs, back to back, share one.
    stretch: float = 0.0


#: The controller's host probe's spread between its readings on a quiet host (gate.host.PRIOR_SPREAD's 2-4%).
PROBE_CV = 0.03


def log_sd(cv: float) -> float:
    """The log-normal's sigma whose coefficient of variation is ``cv``."""
    return math.sqrt(math.log(1 + cv * cv))


def trial(rng: np.random.Generator, s: Setting, ratio: float, nights: int = 1) -> tuple[str, int, str]:
    """One saved baseline and ``nights`` sessions against it, one after another (each its own offset): the verdict
    ('fail', 'inconclusive', 'pass'), the runs, and why it failed where not as a regression shown ('unconfirmed':
    from one run at the budget; 'never': the never-deciding rule; else '').  With ``nights`` > 1, the
    first night that fails, or the last night where every night was inconclusive
    (``dlperf_inconclusive_nights = nights``, which then fails it); else the last night's."""
    sigma, tau = log_sd(s.cv), log_sd(s.offset)
    base_logs = rng.normal(rng.normal(0.0, tau), sigma, s.baseline_runs)
    if s.stretch:  # drawn only then: a seed gives the tables it gave before --stretch
        base_logs = base_logs + rng.normal(0.0, log_sd(s.stretch), s.baseline_runs)
    base_runs = np.exp(base_logs) * 1000.0
    # A saved baseline's figure is the geometric mean of its runs (baseline.measured), and it keeps them.
    probed = s.host is not None
    host_runs = tuple(float(v) for v in np.exp(rng.normal(0.0, log_sd(PROBE_CV), s.baseline_runs))) \
        if probed else None
    expected = Expected(float(np.exp(np.mean(np.log(base_runs)))), "img/s", s.tolerance, "simulated",
                        host_runs=host_runs)
    drift = None
    if s.history:
        history = []
        for _ in range(s.history):  # each night's figure and its runs', as a history store keeps them
            runs = tuple(float(v) for v in np.exp(rng.normal(rng.normal(0.0, tau), sigma, s.night_runs)) * 1000.0)
            history.append((float(np.exp(np.mean(np.log(runs)))), runs))
        drift = drift_mod.drift(history, None, s.tolerance)
    streak = used = 0
    undecided: list[tuple[float, ...]] = []  # the runs of the streak's nights, for the nights judged together
    for _ in range(nights):
        level = math.log(ratio * (s.host or 1.0)) + rng.normal(0.0, tau) + \
            (rng.normal(0.0, log_sd(s.stretch)) if s.stretch else 0.0)
        session = np.exp(rng.normal(level, sigma, s.budget.max_runs)) * 1000.0
        probes = s.host * np.exp(rng.normal(0.0, log_sd(PROBE_CV), s.budget.max_runs)) if probed else None

        def one(index: int, session: np.ndarray = session, probes: np.ndarray | None = probes) -> Attempt:
            probe = None if probes is None else {"index": float(probes[index])}
            return Attempt.from_runs([RunRecord(index, RunStatus.OK, windows=[{"throughput": float(session[index])}],
                                                host_probe=probe)], "img/s", {})

        attempt, evidence = sequential.measure_until_decided(one, expected, [float(v) for v in base_runs],
                                                             s.budget, sleep=lambda seconds: None, drift=drift)
        # The plugin's own policies, as its session applies them (with a history store: the never-deciding nights,
        # which judge the streak's last nights and tonight's runs together first, as controller/pipeline.py does).
        tonight = tuple(f.value for f in evidence.counted)
        together = None
        if nights > 1 and streak + 1 >= nights and undecided:
            seen = dataclasses.replace(evidence, moved=None) if s.nights_as_measured else evidence
            together = nights_mod.with_tonight(undecided[-(nights - 1):], seen, expected.throughput,
                                               [float(v) for v in base_runs], s.tolerance, drift)
        judged = judge_evidence("sim", evidence, "img/s", expected)
        verdict = settle(judged, Policy(s.inconclusive, nights=nights), streak if nights > 1 else None, together,
                         "img/s")
        status = "fail" if verdict.status.value == "fail" else "inconclusive" if verdict.undecided else "pass"
        used += len(attempt.runs)
        streak = streak + 1 if verdict.undecided else 0
        undecided = [*undecided, tonight] if verdict.undecided else []
        if status == "fail":
            shown = judged.status.value == "fail" or (together is not None and together.regression)
            return "fail", used, ("unconfirmed" if evidence.unconfirmed else "") if shown else "never"
    return status, used, ""


def shares(rng: np.random.Generator, s: Setting, ratio: float, trials: int, nights: int = 1) -> dict[str, float]:
    """Percent of ``trials`` that failed, failed not confirmed, failed for never deciding, ended inconclusive,
    passed; and the mean runs (with ``nights``: of :func:`trial`'s nights)."""
    counts = {"fail": 0, "inconclusive": 0, "pass": 0, "unconfirmed": 0, "never": 0}
    runs = 0
    for _ in range(trials):
        status, used, why = trial(rng, s, ratio, nights)
        counts[status] += 1
        if why:
            counts[why] += 1
        runs += used
    out = {k: 100 * counts[k] / trials for k in ("fail", "inconclusive", "pass", "unconfirmed", "never")}
    return {**out, "runs": runs / trials}


#: The issue 43 checks: (what, setting, true ratio, the share measured, the bound, at most or at least).
def checks(trials: int) -> list[tuple[str, Setting, float, str, float, str]]:
    return [
        ("at the tolerance boundary (0.95), CV 2%, no offset, prior", Setting(0.02), 0.95, "fail", 1.0, "<="),
        ("at the tolerance boundary (0.95), CV 5%, no offset, prior", Setting(0.05), 0.95, "fail", 1.0, "<="),
        ("unchanged, CV 2%, 5% session offset, history of 10 nights", Setting(0.02, 0.05, history=10), 1.0,
         "fail", 2.0, "<="),
        ("unchanged, CV 5%, 5% session offset, history of 10 nights", Setting(0.05, 0.05, history=10), 1.0,
         "fail", 2.0, "<="),
        ("unchanged, CV 2%, 5% session offset, no history (prior)", Setting(0.02, 0.05), 1.0, "fail", 2.0, "<="),
        ("twice the tolerance (0.90), CV 5%, no offset, prior: failed", Setting(0.05), 0.90, "fail", 90.0, ">="),
        ("twice the tolerance (0.90), CV 5%, no offset, prior: not passed", Setting(0.05), 0.90, "flagged", 90.0,
         ">="),
        ("twice the tolerance (0.90), CV 2%, no offset, prior: failed", Setting(0.02), 0.90, "fail", 90.0, ">="),
        ("twice the tolerance (0.90), CV 5%, no offset, prior: failed within 3 nights", Setting(0.05), 0.90,
         "fail@3", 90.0, ">="),
        ("unchanged, CV 5%, no offset, prior: failed within 3 nights", Setting(0.05), 1.0, "fail@3", 2.0, "<="),
    ]


def acceptance(trials: int, seed: int, out=print) -> list[tuple[str, float, float, str, bool]]:
    """Run :func:`checks`; print and return (what, measured %, bound, sense, met) for each."""
    rng = np.random.default_rng(seed)
    results = []
    out(f"issue 43 checks: tolerance 5%, baseline of 10 runs, --dlperf-runs 1, --dlperf-max-runs 10, "
        f"--dlperf-inconclusive pass, {trials} trials each (seed {seed})")
    for what, setting, ratio, key, bound, sense in checks(trials):
        nights = 3 if key == "fail@3" else 1
        got = shares(rng, setting, ratio, trials // nights, nights)
        value = got["fail"] + got["inconclusive"] if key == "flagged" else got[key.split("@")[0]]
        met = value <= bound if sense == "<=" else value >= bound
        results.append((what, value, bound, sense, met))
        out(f"  {what}: {value:5.1f}% (target {sense} {bound:g}%): {'met' if met else 'NOT MET'}")
    return results


def paired_trial(rng: np.random.Generator, s: Setting, ratio: float) -> tuple[str, int]:
    """One A/B session of pairs ('fail', 'inconclusive', 'pass'; and its pairs): each run's log figure the session's offset (both
    sides alike), the side's truth and the run's noise; the candidate's memory probe moved by ``ratio`` too."""
    sigma, offset = log_sd(s.cv), rng.normal(0.0, log_sd(s.offset))

    def run(index: int, truth: float) -> RunFigure:
        probe = 10.0 * truth * math.exp(rng.normal(0.0, 0.1))
        return RunFigure(index, 1000.0 * math.exp(offset + math.log(truth) + rng.normal(0.0, sigma)), bandwidth=probe)

    def measure_pair(index: int, order: tuple[str, str]) -> paired.Pair:
        return paired.Pair(index, order[0], run(index, ratio), run(index, 1.0))

    found = measure_pairs(measure_pair, sequential.Budget(max_runs=paired.MAX_PAIRS), s.tolerance, 1,
                          sleep=lambda seconds: None)
    return {Decision.REGRESSION: "fail", Decision.UNDECIDED: "inconclusive"}.get(found.decision, "pass"), \
        len(found.pairs)


def paired_shares(rng: np.random.Generator, s: Setting, ratio: float, trials: int) -> dict[str, float]:
    """Percent of ``trials`` A/B sessions that failed, ended inconclusive, passed (or improved); the mean pairs."""
    counts = {"fail": 0, "inconclusive": 0, "pass": 0}
    pairs = 0
    for _ in range(trials):
        status, used = paired_trial(rng, s, ratio)
        counts[status] += 1
        pairs += used
    return {**{k: 100 * v / trials for k, v in counts.items()}, "runs": pairs / trials}


#: The promise each row of ``--both-errors`` is held to: unchanged FAIL <= 1%; 2 x tolerance PASS <= 1%, FAIL >= 90%.
PROMISE = (1.0, 1.0, 90.0)


def _missed(unchanged: dict, twice: dict) -> list[str]:
    """The parts of :data:`PROMISE` a row misses, each with its share to one decimal (a share printed as 90 may be
    89.5, under the promise)."""
    return [f"{label} {share:.1f}%" for label, share, bad in (
        ("unchanged FAIL", unchanged["fail"], unchanged["fail"] > PROMISE[0]),
        ("twice PASS", twice["pass"], twice["pass"] > PROMISE[1]),
        ("twice FAIL", twice["fail"], twice["fail"] < PROMISE[2])) if bad]


def both_errors(trials: int, seed: int, tolerance: float = 0.05, out=print) -> list[bool]:
    """The table of both errors (see the module's text); returns whether each row met :data:`PROMISE`."""
    rng = np.random.default_rng(seed)
    out(f"both errors: tolerance {tolerance:g}, baseline of 10 runs, --dlperf-max-runs 10 (pairs: at most "
        f"{paired.MAX_PAIRS}), {trials} trials a cell "
        f"(seed {seed}); FAIL / PASS / INCONCLUSIVE in %")
    head = f"{'verdict':<8} | {'CV':>4} | {'offset':>6} | {'unchanged F/P/I':>16} | {'runs':>4} | " \
           f"{'-tol F/P/I':>16} | {'-2 tol F/P/I':>16} | promise"
    out(head)
    out("-" * len(head))
    met = []
    for history, name in ((0, "stored"), (10, "history"), (0, "paired")):
        for cv in (0.005, 0.02, 0.05):
            for offset in (0.0, 0.02, 0.05):
                setting = Setting(cv, offset, tolerance, history=history)
                share = paired_shares if name == "paired" else shares
                cells = [share(rng, setting, ratio, trials) for ratio in (1.0, 1 - tolerance, 1 - 2 * tolerance)]
                missed = _missed(cells[0], cells[2])
                ok = not missed
                met.append(ok)
                fpi = [f"{c['fail']:4.1f} /{c['pass']:4.0f} /{c['inconclusive']:4.0f}" if c is cells[0] else
                       f"{c['fail']:4.0f} /{c['pass']:4.0f} /{c['inconclusive']:4.0f}" for c in cells]
                runs = f"{cells[0]['runs']:4.1f}"
                out(f"{name:<8} | {100 * cv:>3g}% | {100 * offset:>5g}% | {fpi[0]:>16} | {runs:>4} | {fpi[1]:>16} | "
                    f"{fpi[2]:>16} | {'met' if ok else 'not met: ' + ', '.join(missed)}")
    out(f"promise: unchanged FAIL <= {PROMISE[0]:g}%, twice the tolerance PASS <= {PROMISE[1]:g}% and FAIL >= "
        f"{PROMISE[2]:g}%; met in {sum(met)} of {len(met)} rows")
    return met


#: The settings of ``--three-nights``: (CV, session offsets, nights of history).
NIGHT_SETTINGS = ((0.02, 0.0, 0), (0.05, 0.0, 0), (0.02, 0.02, 0), (0.05, 0.02, 0), (0.02, 0.02, 10),
                  (0.05, 0.02, 10), (0.05, 0.05, 10))


def three_nights(trials: int, seed: int, out=print, host: float | None = None) -> None:
    """Unchanged code and twice the tolerance over three nights against one save (the never-deciding rule failing a
    third undecided night, after judging the nights together): FAIL / PASS / INCONCLUSIVE in %.  ``host``: the host's
    speed in every night over the save's; where it moved, each setting's row for the nights judged both ways (the
    rule) and as measured only (before 0.8.0), with the same draws."""
    moved = "" if host is None else f"; the host {host - 1:+.0%} since the save, its probe read after each run"
    out(f"three nights against one save, {trials} sessions a cell (seed {seed}); FAIL / PASS / INCONCLUSIVE in %{moved}")
    out("setting | unchanged, 3 nights | 2 x tolerance, 3 nights")
    rng = np.random.default_rng(seed)
    for cv, offset, history in NIGHT_SETTINGS:
        for as_measured in ((False,) if host is None else (False, True)):
            if host is not None:  # the two rules' rows from the same draws
                rng = np.random.default_rng([seed, int(1000 * cv), int(1000 * offset), history])
            setting = Setting(cv, offset, history=history, host=host, nights_as_measured=as_measured)
            u, t = (shares(rng, setting, ratio, trials, nights=3) for ratio in (1.0, 0.9))
            rule = "" if host is None else ", as measured only" if as_measured else ", both ways"
            out(f"CV {cv:g}, offsets {offset:g}, history {history}{rule} | {u['fail']:.1f}/{u['pass']:.0f}/"
                f"{u['inconclusive']:.0f} | {t['fail']:.0f}/{t['pass']:.1f}/{t['inconclusive']:.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cv", default="0.02,0.05", help="noise between runs, comma-separated (0.02,0.05)")
    parser.add_argument("--offset", default="0", help="sd of a session's offset, comma-separated (0)")
    parser.add_argument("--stretch", default="0",
                        help="sd of the host's level by stretches: each run of the save in one of its own, a "
                             "session's runs in one together; comma-separated (0)")
    parser.add_argument("--no-stretch-rule", action="store_true",
                        help="judge as verdict_rules 10 did, with no stretch in the interval (for a side by side)")
    parser.add_argument("--nights", type=int, default=1,
                        help="sessions against one save, the never-deciding rule failing the last of as many "
                             "undecided ones (1)")
    parser.add_argument("--ratios", default=RATIOS, help=f"true figure over the baseline's ({RATIOS})")
    parser.add_argument("--tolerance", type=float, default=0.05, help="the baseline's tolerance (0.05)")
    parser.add_argument("--baseline-runs", type=int, default=10,
                        help="runs the saved baseline kept (10: what --dlperf-save-baseline measures)")
    parser.add_argument("--first-runs", type=int, default=1, help="--dlperf-runs (1)")
    parser.add_argument("--max-runs", type=int, default=10, help="--dlperf-max-runs (10)")
    parser.add_argument("--history", type=int, default=0,
                        help="earlier nights in a history store, whose drift the verdict uses (0: the prior)")
    parser.add_argument("--inconclusive", default="pass", choices=("below", "fail", "pass"),
                        help="--dlperf-inconclusive (pass)")
    parser.add_argument("--trials", type=int, default=2000, help="trials per cell (2000)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (0)")
    parser.add_argument("--acceptance", action="store_true", help="print the issue 43 checks instead of the table")
    parser.add_argument("--three-nights", action="store_true",
                        help="print unchanged code and twice the tolerance over three nights against one save")
    parser.add_argument("--host", type=float, default=None,
                        help="--three-nights: the host's speed in every night over the save's, read by its probe "
                             "(1.0: unmoved; default: no probe)")
    parser.add_argument("--both-errors", action="store_true",
                        help="print one table of both errors, stored and history verdicts (issue 53)")
    opts = parser.parse_args(argv)
    try:
        cvs = [float(v) for v in opts.cv.split(",")]
        offsets = [float(v) for v in opts.offset.split(",")]
        stretches = [float(v) for v in opts.stretch.split(",")]
        ratios = [float(v) for v in opts.ratios.split(",")]
    except ValueError as exc:
        parser.error(f"--cv, --offset, --stretch, --ratios: comma-separated numbers: {exc}")
    if opts.nights < 1 or opts.trials < 1 or opts.max_runs < opts.first_runs or opts.first_runs < 1 \
            or opts.baseline_runs < 1 \
            or opts.history < 0 or opts.history == 1:
        parser.error("--nights, --trials, --first-runs, --baseline-runs: at least 1; --max-runs: at least "
                     "--first-runs; --history: 0 or at least 2")
    with contextlib.ExitStack() as stack:
        if opts.no_stretch_rule:  # both places the plugin reads a stretch from (gate.evidence, gate.nights)
            for module in (evidence_mod, nights_mod):
                stack.enter_context(mock.patch.object(module, "excess_variance", lambda *args, **kwargs: 0.0))
        return tables(opts, cvs, offsets, stretches, ratios)


def tables(opts: argparse.Namespace, cvs: list[float], offsets: list[float], stretches: list[float],
           ratios: list[float]) -> int:
    """Print what ``opts`` asks for: the acceptance checks, three nights, both errors, or the table."""
    started = time.monotonic()
    if opts.acceptance:
        met = acceptance(opts.trials, opts.seed)
        print(f"{sum(m[-1] for m in met)} of {len(met)} met; {time.monotonic() - started:.0f} s")
        return 0
    if opts.three_nights:
        three_nights(opts.trials, opts.seed, host=opts.host)
        return 0
    if opts.both_errors:
        both_errors(opts.trials, opts.seed, opts.tolerance)
        print(f"{time.monotonic() - started:.0f} s")
        return 0
    budget = sequential.Budget(first_runs=opts.first_runs, max_runs=opts.max_runs)
    rng = np.random.default_rng(opts.seed)
    print(f"tolerance {100 * opts.tolerance:g}%, baseline of {opts.baseline_runs} runs, --dlperf-runs "
          f"{opts.first_runs}, --dlperf-max-runs {opts.max_runs}, --dlperf-inconclusive {opts.inconclusive}, "
          f"{'history of %d nights' % opts.history if opts.history else 'the drift prior'}, "
          f"{opts.trials} trials each (seed {opts.seed})" + (f", {opts.nights} nights" if opts.nights > 1 else ""))
    print("  cv | offset | stretch | ratio | failed | of them not confirmed | inconclusive, passed "
          "| passed or improved | mean runs" + (" | of the failed, never decided" if opts.nights > 1 else ""))
    print("-----+--------+---------+-------+--------+-----------------------+----------------------"
          "+--------------------+----------" + ("+-----------------------------" if opts.nights > 1 else ""))
    for cv, offset, stretch in ((c, o, t) for c in cvs for o in offsets for t in stretches):
        setting = Setting(cv, offset, opts.tolerance, opts.baseline_runs, budget, opts.inconclusive, opts.history,
                          stretch=stretch)
        for ratio in ratios:
            got = shares(rng, setting, ratio, opts.trials, opts.nights)
            print(f"{100 * cv:3.0f}% | {100 * offset:5.1f}% | {100 * stretch:6.1f}% | {ratio:5.2f} | "
                  f"{got['fail']:5.1f}% | "
                  f"{got['unconfirmed']:20.1f}% | {got['inconclusive']:19.1f}% | {got['pass']:17.1f}% | "
                  f"{got['runs']:9.2f}" + (f" | {got['never']:27.1f}%" if opts.nights > 1 else ""))
    print(f"failed: a regression (or, under --inconclusive below, inconclusive with the estimate below the "
          f"threshold); 'of them not confirmed': one run beyond its look's boundary at the budget; "
          f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
