"""The verdict's statistics of issue 43: the looks paid for (gate/looks.py), the drift between sessions
(gate/drift.py) in the interval, and a case that never decides (policy.never_decided)."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import special, stats

from pytest_dlperf.gate import drift as dr
from pytest_dlperf.gate import evidence as ev
from pytest_dlperf.gate import looks
from pytest_dlperf.gate.policy import never_decided
from pytest_dlperf.reporting.verdicts import REASON, render
from pytest_dlperf.results.judgement import Judgement, Reason, Why
from pytest_dlperf.results.case import Status


def test_one_look_is_the_fixed_test_and_the_looks_together_spend_alpha():
    assert looks.boundary(1, 1, 0.01) == pytest.approx(special.ndtri(0.99), abs=1e-9)
    assert looks.boundary(1, 1, 0.05) == pytest.approx(1.6449, abs=1e-4)
    ten = looks.boundaries(10, 0.01)
    assert list(ten) == sorted(ten, reverse=True)  # O'Brien-Fleming-like: strict first, about 2.4 last
    assert ten[0] == looks.NEVER and 2.33 < ten[-1] < 2.5
    # The chance that a case exactly at its threshold crosses at some look: alpha (Monte Carlo, the score's walk).
    rng = np.random.default_rng(0)
    walks = np.cumsum(rng.normal(size=(200_000, 10)), axis=1) / np.sqrt(np.arange(1, 11))
    assert (walks > np.array(ten)).any(axis=1).mean() == pytest.approx(0.01, abs=0.0015)
    # A look past the plan takes the last boundary; a look before the first is an error.
    assert looks.boundary(12, 10, 0.01) == ten[-1]
    with pytest.raises(ValueError):
        looks.boundary(0, 10, 0.01)


def test_looks_at_unequal_information_spend_alpha_together():
    # A saved baseline's runs and the drift do not shrink as the session's runs come: the first looks hold more
    # of the evidence than k / K, and the boundaries at their fractions are lower than equally spaced ones.
    fractions = (0.237, 0.41, 0.546, 0.651, 0.737, 0.8, 0.85, 0.9, 0.95, 1.0)
    at = looks.boundaries_at(fractions, 0.01)
    assert at[0] < looks.boundaries(10, 0.01)[1] and at[-1] == pytest.approx(looks.boundaries(10, 0.01)[-1], abs=0.1)
    assert looks.boundaries_at(tuple(k / 10 for k in range(1, 11)), 0.01) == looks.boundaries(10, 0.01)
    # Monte Carlo: a Brownian motion in information time, standardized at each look, crosses with chance alpha.
    rng = np.random.default_rng(3)
    steps = np.diff((0.0,) + fractions)
    scores = np.cumsum(rng.normal(size=(200_000, 10)) * np.sqrt(steps), axis=1) / np.sqrt(fractions)
    assert (scores > np.array(at)).any(axis=1).mean() == pytest.approx(0.01, abs=0.0015)
    # A look past the plan (its fraction 1 again) takes the plan's last boundary.
    assert looks.boundary_at(fractions + (1.0,), 0.01) == pytest.approx(at[-1], abs=0.01)  # fractions to 1/100
    with pytest.raises(ValueError):
        looks.boundaries_at((0.5, 0.4), 0.01)


def test_the_information_fractions_of_a_case_against_a_saved_baseline():
    # sigma 5%, a baseline of 10 runs, tau 1% twice: V_n = 25e-4 (1/n + 1/10) + 2e-4.
    est = ev.Estimate(1.0, 0.9, 1.1, runs=3, sigma=0.05, dof=11.0, baseline=1.0, baseline_runs=10, tau=0.01,
                      offsets=2.0)
    variance = [0.05 ** 2 * (1 / n + 0.1) + 2e-4 for n in (1, 2, 3, 10)]
    assert ev.information_fractions(est, 3, 10) == pytest.approx([variance[3] / v for v in variance[:3]])
    # Pairs (no baseline runs, no drift): information grows as the pairs, k / K.
    pairs = dataclasses.replace(est, baseline_runs=0, tau=0.0, offsets=0.0)
    assert ev.information_fractions(pairs, 3, 10) == pytest.approx([0.1, 0.2, 0.3])


def test_the_t_boundary_is_the_same_tail_at_the_dof():
    z = looks.boundary(3, 5, 0.01)
    assert ev.t_boundary(3, 5, 8.0) == pytest.approx(stats.t.ppf(stats.norm.cdf(z), 8.0), rel=1e-6)
    assert ev.t_boundary(3, 5, math.inf) == pytest.approx(z, rel=1e-9)


def test_the_drift_widens_the_interval_by_two_offsets_against_a_one_session_baseline():
    base = [1000.0 * (1 + 0.01 * d) for d in (-1, 0, 1, 0, -1, 1, 0, 0, 1, -1)]
    bare = ev.estimate([990.0, 1000.0], 0.05, 1000.0, base)
    drift = ev.Drift(0.02, None)
    wide = ev.estimate([990.0, 1000.0], 0.05, 1000.0, base, drift=drift)
    assert wide.se ** 2 == pytest.approx(bare.se ** 2 + 2 * 0.02 ** 2)
    history = ev.estimate([990.0, 1000.0], 0.05, 1000.0, base, drift=drift, offsets=1)
    assert history.se ** 2 == pytest.approx(bare.se ** 2 + 0.02 ** 2)
    # Satterthwaite: a tau known (the prior) adds no uncertainty of its own; one from 4 nights does.
    assert wide.dof > bare.dof
    assert ev.estimate([990.0, 1000.0], 0.05, 1000.0, base, drift=ev.Drift(0.02, 4.0)).dof < wide.dof


def test_the_drift_comes_from_the_case_s_nights_else_its_machine_s_else_the_prior():
    assert dr.prior(0.05).tau == pytest.approx(math.log1p(0.01)) and dr.prior(0.05).dof is None
    rng = np.random.default_rng(1)
    nights = list(1000.0 * np.exp(rng.normal(0, 0.05, 40)))
    own = dr.drift(nights, None, 0.05)
    assert own.tau == pytest.approx(0.05, rel=0.25) and own.dof == pytest.approx(2 * 39 ** 2 / (3 * 39 - 1))
    assert own.source.startswith("history: this case's 40 sessions")
    # A slow trend barely moves it (successive differences).
    trend = [v * (1 + 0.01 * i) for i, v in enumerate(nights)]
    assert dr.drift(trend, None, 0.05).tau == pytest.approx(own.tau, rel=0.1)
    # Too few nights of its own: its machine class's, pooled; too few there: the prior.
    pooled = dr.drift(nights[:2], {"a": nights[:20], "b": nights[20:]}, 0.05)
    assert pooled.tau == pytest.approx(own.tau, rel=0.1) and "machine class" in pooled.source
    assert dr.drift(nights[:2], {"a": nights[:3]}, 0.05) == dr.prior(0.05)
    # Each night's own noise (its runs' spread / their number) is not drift: nights that differ only by it give
    # none beyond the prior, which is also the least a history gives.
    noisy = []
    for _ in range(40):
        runs = tuple(1000.0 * np.exp(rng.normal(0, 0.05, 3)))
        noisy.append((float(np.exp(np.mean(np.log(runs)))), runs))
    assert dr.drift([f for f, _ in noisy], None, 0.05).tau > 0.02
    assert dr.drift(noisy, None, 0.05).tau == dr.prior(0.05).tau


def test_a_case_inconclusive_night_after_night_fails_saying_so():
    undecided = Judgement(Status.INCONCLUSIVE, (Reason("c: 900.0 img/s", Why.HEADLINE, Status.INCONCLUSIVE),
                                                Reason("undecided after 10 runs", Why.EVIDENCE)), (), -0.1, True)
    assert never_decided(undecided, 1, 3) is undecided  # two nights in a row: not yet
    failed = never_decided(undecided, 2, 3)
    assert failed.status is Status.FAIL and failed.undecided and render(failed).startswith("FAIL c: 900.0 img/s")
    assert render(failed).split(REASON)[-1].startswith(
        "fails: inconclusive 3 sessions in a row in the history store (dlperf_inconclusive_nights 3)")
    passed = Judgement(Status.PASS, (Reason("c", Why.HEADLINE, Status.PASS),), (), 0.0)
    assert never_decided(passed, 5, 3) is passed


def test_the_history_gives_each_case_its_drift_and_its_streak_of_inconclusive_nights():
    from pytest_dlperf.controller import history as hooks
    from pytest_dlperf.history.analysis import Point
    from pytest_dlperf.history.records import CaseRow, SessionRow

    rng = np.random.default_rng(2)
    rows = []
    for night in range(12):
        session = SessionRow(id=f"s{night}", created=f"2026-11-{night + 1:02d}T02:00:00", machine="m")
        verdict = "inconclusive" if night >= 10 else "pass"
        rows.append(Point(session, CaseRow("c", {}, "img/s", float(1000 * np.exp(rng.normal(0, 0.04))), (), verdict,
                                           baseline=1000.0, tolerance=0.05)))
    found = hooks.from_points(rows, 0, "m")
    assert found.baselines == {} and found.inconclusive_streak("c") == 2 and found.inconclusive_streak("d") == 0
    drift = found.drift("c", 0.05)
    assert drift.source == "history: this case's 12 sessions" and 0.02 < drift.tau < 0.08  # undecided nights too
    steady = hooks.from_points([dataclasses.replace(p, case=dataclasses.replace(p.case, throughput=1000.0))
                                for p in rows], 0, "m")
    assert steady.drift("c", 0.05).tau == dr.prior(0.05).tau  # never below the prior


def test_the_never_deciding_streak_survives_its_own_fail_and_other_kinds_of_session():
    # Issue 53: the failing night was stored as "fail" and ended the streak, so a case that never decides was red
    # one night in three; any other session of the case (a PR's, another tolerance) broke it too.
    from pytest_dlperf.controller import history as hooks
    from pytest_dlperf.history.analysis import Point
    from pytest_dlperf.history.records import CaseRow, SessionRow

    def night(i, verdict, decided, tolerance=0.05, baseline=1000.0):
        session = SessionRow(id=f"s{i}", created=f"2026-11-{i + 1:02d}T02:00:00", machine="m")
        return Point(session, CaseRow("c", {}, "img/s", 990.0, (), verdict, baseline=baseline, tolerance=tolerance,
                                      decided=decided))

    nights = [night(0, "pass", True), night(1, "inconclusive", False), night(2, "inconclusive", False),
              night(3, "fail", False),  # failed by the rule: still undecided
              night(4, "pass", True, tolerance=0.10),  # another kind of session: neither counts nor breaks
              night(5, "pass", True, baseline=None, tolerance=None),  # a local run without a baseline, likewise
              night(6, "error", None),  # a crash, likewise
              night(7, "inconclusive", None)]  # a row of an older store: its verdict says it did not decide
    found = hooks.from_points(nights, 0, "m")
    assert found.inconclusive_streak("c", 0.05) == 4
    assert found.inconclusive_streak("c", 0.10) == 0  # its own kind decided
    decided = hooks.from_points([*nights, night(8, "fail", True)], 0, "m")  # a decided FAIL ends the streak
    assert decided.inconclusive_streak("c", 0.05) == 0
