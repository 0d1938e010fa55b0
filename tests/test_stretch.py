"""A host whose level moves by stretches of seconds to minutes (issue 53, a 2-core Xeon VM that flips 40%): a save
spreads its runs over a minute and sees several stretches, a session's runs back to back sit in one.  Where the
save's runs spread significantly more than the session's, the difference is that one stretch's offset, which no
number of the session's runs averages out (:func:`pytest_dlperf.gate.stats.excess_variance`, used by
:func:`pytest_dlperf.gate.evidence.estimate` and :func:`pytest_dlperf.gate.nights.estimate`)."""

from __future__ import annotations

import math
import statistics

import pytest

from pytest_dlperf.gate import evidence as ev
from pytest_dlperf.gate import nights
from pytest_dlperf.gate.drift import prior
from pytest_dlperf.gate.stats import excess_variance

#: A save on a host whose level moves by stretches: its 10 runs, spread over a minute, 2,019-3,394 img/s (CV 19%),
#: as the Xeon VM's save of 2026-11-29 (benchmarks/results/2026-11-29-issue-53-xeon-save-and-faster-probes.md).
WIDE_SAVE = [2019.0, 3394.0, 2650.0, 3100.0, 2200.0, 3300.0, 2450.0, 2900.0, 2100.0, 3250.0]
#: The same host's save made in one stretch: runs 1% apart.
TIGHT_SAVE = [2700.0 * (1 + 0.01 * d) for d in (-1, 1, 0, -1, 1, 0, -1, 1, 0, 0)]
#: A session of unchanged code whose 5 runs, back to back, all came in a slow stretch: 31% below the save's figure.
SLOW_STRETCH = [1860.0 * (1 + 0.01 * d) for d in (-1, 0, 1, 0, -1)]


def logs(values):
    return [math.log(v) for v in values]


def decide(runs, save, tolerance=0.05):
    base = math.exp(statistics.fmean(logs(save)))
    est = ev.estimate(runs, tolerance, base, save, drift=prior(tolerance))
    return est, ev.decide(est, tolerance)


def test_the_excess_is_the_difference_of_the_variances_where_an_f_test_says_so():
    wide, tight = logs(WIDE_SAVE), logs(SLOW_STRETCH)
    assert excess_variance(wide, [tight]) == pytest.approx(statistics.variance(wide) - statistics.variance(tight))
    assert excess_variance(wide, [logs(WIDE_SAVE[:4])]) == 0.0  # the same spread
    assert excess_variance(wide, [tight[:1]]) == 0.0  # one run has no spread of its own
    assert excess_variance(tight, [wide]) == 0.0  # one-sided: only a wider save counts
    # Several samples: each about its own mean (nights at different levels, each tight).
    assert excess_variance(wide, [tight, [v + 0.3 for v in tight]]) > 0.0


def test_a_session_in_one_slow_stretch_of_a_wide_save_is_not_a_regression():
    est, decision = decide(SLOW_STRETCH, WIDE_SAVE)
    assert est.value / est.baseline < 0.72  # 30% below the save's figure, every run of it
    assert decision is ev.Decision.UNDECIDED  # before verdict_rules 11: a regression (a false alarm)
    assert est.tau > prior(0.05).tau  # the stretch is in the interval, as a session's offset


def test_runs_that_spread_as_the_save_s_did_or_a_save_made_in_one_stretch_still_decide():
    # 30% slower code whose runs saw both levels, as the save's did: no stretch of its own, a regression.
    slowed = [0.7 * v for v in WIDE_SAVE[:6]]
    est, decision = decide(slowed, WIDE_SAVE)
    assert decision is ev.Decision.REGRESSION and est.tau == prior(0.05).tau
    # The slow stretch against a save whose runs were as close as its own: nothing tells a stretch, a regression.
    assert decide(SLOW_STRETCH, TIGHT_SAVE)[1] is ev.Decision.REGRESSION
    # One run has no spread to compare: judged with the pooled spread, as ever.
    assert decide(SLOW_STRETCH[:1], WIDE_SAVE)[0].tau == prior(0.05).tau


def test_nights_each_in_a_stretch_of_their_own_carry_it_each():
    night = SLOW_STRETCH[:3]
    spread_nights = [night, [1.5 * v for v in night], night]
    base = math.exp(statistics.fmean(logs(WIDE_SAVE)))
    est = nights.estimate(spread_nights, base, WIDE_SAVE, 0.05)
    assert est.tau > prior(0.05).tau
    alike = [WIDE_SAVE[:3], WIDE_SAVE[3:6], WIDE_SAVE[6:9]]  # nights whose runs spread as the save's did
    assert nights.estimate(alike, base, WIDE_SAVE, 0.05).tau == prior(0.05).tau
