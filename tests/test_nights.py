"""Undecided nights judged together (pytest_dlperf.gate.nights): the never-deciding rule fails a case only where its
last nights together decide nothing, fails it as a regression where they show one, and leaves it green where they
pass (issue 53: the rule failed unchanged code on a noisy host)."""

import dataclasses
import math

import numpy as np
import pytest

from pytest_dlperf.controller.history import HistoryBaselines
from pytest_dlperf.gate import evidence as ev
from pytest_dlperf.gate import nights
from pytest_dlperf.gate.policy import Policy, settle
from pytest_dlperf.history.records import CaseRow
from pytest_dlperf.results.judgement import Judgement, Reason, Status, Why

BASE_RUNS = [1000.0 * (1 + 0.05 * d) for d in (-1, 1, -0.5, 0.5, 0, -1, 1, -0.5, 0.5, 0)]


def noisy_night(rng, level, runs=3, cv=0.05):
    return [float(v) for v in level * np.exp(rng.normal(0.0, cv, runs))]


def test_the_estimate_pools_within_nights_and_averages_their_offsets():
    est = nights.estimate([[990.0, 1010.0], [1039.5, 1060.5]], 1000.0, BASE_RUNS, 0.05)
    assert est.value == pytest.approx(math.exp((math.log(990 * 1010) / 2 + math.log(1039.5 * 1060.5) / 2) / 2))
    assert est.runs == 4 and est.offsets == pytest.approx(1.5)  # two nights' offsets averaged, the save's whole
    # sigma comes from within each night and the baseline's runs, not from the 5% between the two nights.
    within = nights.estimate([[990.0, 1010.0], [990.0, 1010.0]], 1000.0, BASE_RUNS, 0.05)
    assert est.sigma == pytest.approx(within.sigma)
    one = ev.estimate([990.0, 1010.0], 0.05, 1000.0, BASE_RUNS, drift=ev.Drift(0.01))
    assert est.se < one.se  # more runs and more offsets averaged than one night's


def test_unchanged_nights_each_undecided_pass_together_and_a_slower_case_fails():
    rng = np.random.default_rng(3)
    unchanged = [noisy_night(rng, 1000.0) for _ in range(3)]
    for night in unchanged:
        alone = ev.estimate(night, 0.05, 1000.0, BASE_RUNS, drift=ev.Drift(0.01))
        assert ev.decide(alone, 0.05) is ev.Decision.UNDECIDED or alone.runs == 3
    together = nights.judge(unchanged, 1000.0, BASE_RUNS, 0.05)
    assert together.decision is ev.Decision.PASS and together.nights == 3
    slower = nights.judge([noisy_night(rng, 880.0) for _ in range(3)], 1000.0, BASE_RUNS, 0.05)
    assert slower.decision is ev.Decision.REGRESSION
    assert slower.line("img/s").startswith("its last 3 nights together (9 runs): ")
    assert slower.line("img/s").endswith(": they show it below the threshold")
    assert nights.judge([[1000.0], []], 1000.0, BASE_RUNS, 0.05) is None  # one night with runs is not nights


def undecided(message="INCONCLUSIVE c: 990 img/s"):
    return Judgement(Status.INCONCLUSIVE, (Reason(message, Why.HEADLINE, Status.INCONCLUSIVE),
                                           Reason("undecided after 3 runs", Why.EVIDENCE)), undecided=True)


def test_the_never_deciding_rule_judges_the_nights_together_before_failing():
    rng = np.random.default_rng(5)
    policy = Policy(nights=3)
    passing = nights.judge([noisy_night(rng, 1000.0) for _ in range(3)], 1000.0, BASE_RUNS, 0.05)
    kept = settle(undecided(), policy, 2, passing, "img/s")
    assert not kept.failed and "nights together" in kept.reasons[-1].text
    assert kept.reasons[-1].text.endswith(": they pass: not failed for never deciding")
    failing = nights.judge([noisy_night(rng, 850.0) for _ in range(3)], 1000.0, BASE_RUNS, 0.05)
    failed = settle(undecided(), policy, 2, failing, "img/s")
    assert failed.failed and failed.reasons[-1].text.startswith("fails: its last 3 nights together")
    stuck = nights.judge([[700.0, 1300.0], [800.0, 1250.0], [650.0, 1350.0]], 1000.0, BASE_RUNS, 0.05)
    assert stuck.decision is ev.Decision.UNDECIDED
    still = settle(undecided(), policy, 2, stuck, "img/s")
    assert still.failed and "; its last 3 nights together (6 runs): " in still.reasons[-1].text
    assert still.reasons[-1].text.endswith("or gate against pairs (--dlperf-against), whose two sides share the "
                                           "host's moves")  # what decides on a host too noisy for a stored figure
    assert not settle(undecided(), policy, 1, failing, "img/s").failed  # the second night: the rule waits


def row(runs, verdict="inconclusive", tolerance=0.05, busy_runs=0, decided=False):
    return CaseRow("c", {}, "img/s", 1000.0, tuple(runs), verdict, baseline=1000.0, tolerance=tolerance,
                   busy_runs=busy_runs, decided=decided)


def test_the_history_gives_the_streak_s_nights_runs_oldest_first():
    history = HistoryBaselines(0, "cpu", {}, verdicts={"c": [
        row([900.0], "fail", decided=True), row([1.0, 2.0]), row([3.0], busy_runs=1), row([4.0], tolerance=0.1),
        row([5.0, 6.0]), row([7.0])]})
    assert history.undecided_runs("c", 0.05, 2) == ((5.0, 6.0), (7.0,))
    # A night with a busy run is in the streak but not judged; another tolerance's neither; a decided night ends it.
    assert history.undecided_runs("c", 0.05, 5) == ((1.0, 2.0), (5.0, 6.0), (7.0,))
    assert history.inconclusive_streak("c", 0.05) == 4
    assert history.undecided_runs("other", 0.05, 2) == ()


def test_nights_that_rule_out_twice_the_tolerance_keep_an_undecided_case_green():
    """3.5% below the save, undecided together (nearer the threshold than the baseline, the interval reaching below
    it), but ruling out a slowdown of 10%: its noise hides nothing as large as a pass's promise, so it is not failed
    for never deciding; a case 10% slower is."""
    level = [965.0 * (1 + 0.01 * d) for d in (-1, 0, 1)]
    near = nights.judge([level] * 3, 1000.0, BASE_RUNS, 0.05)
    assert near.decision is ev.Decision.UNDECIDED and near.clears
    assert 900.0 <= near.estimate.low < 950.0 and ": they rule out a slowdown over " in near.line("img/s")
    kept = settle(undecided(), Policy(nights=3), 2, near, "img/s")
    assert not kept.failed and kept.reasons[-1].text.endswith("%: not failed for never deciding")
    slower = nights.judge([[v * 0.9 / 0.965 for v in level]] * 3, 1000.0, BASE_RUNS, 0.05)
    assert not slower.clears and settle(undecided(), Policy(nights=3), 2, slower, "img/s").failed


def test_a_case_whose_sessions_drift_too_far_for_its_save_is_named_before_any_case_runs():
    """A history whose nights moved 5% apart: against a saved baseline a 5% tolerance cannot pass the case unchanged
    in 10 runs, so the session says so before any case, with what to run instead; steady nights say nothing."""
    from types import SimpleNamespace

    from pytest_dlperf.baseline.document import Entry
    from pytest_dlperf.cases import Case
    from pytest_dlperf.controller.references import References

    case = Case.make("tiny", "fp32", 32, 1)
    entry = Entry(case, 1000.0, "img/s", None, "test", {}, 0,
                  runs=tuple(1000.0 * (1 + 0.01 * d) for d in (-1, 0, 1, 0, -1, 1, 0, 0, 1, -1)))
    baseline = SimpleNamespace(find=lambda c: entry if c == case else None)
    options = SimpleNamespace(max_runs=10, inconclusive_nights=3, tolerance=None)

    def references(levels):
        nights = [(level, (level * 0.99, level * 1.01)) for level in levels]
        history = HistoryBaselines(0, "cpu", {}, nights={case.id: nights})
        return References(options, baseline, None, [], history=history)

    moving = references([1000.0 * (1 + 0.05 * d) for d in (1, -1, 1, -1, 1, -1, 1, -1)])
    line = moving.undecidable(case)
    assert line.startswith(f"{case.id}: its sessions here drift ") and "history: this case's 8 sessions" in line
    assert "10 runs cannot pass it unchanged at 5%" in line and "--dlperf-against last-good" in line
    wider = float(line.rsplit("--dlperf-tolerance ", 1)[1])
    assert 0.05 < wider < 0.5
    assert references([1000.0 * (1 + 0.002 * d) for d in (1, -1, 1, -1, 1, -1)]).undecidable(case) is None
    assert moving.undecidable(Case.make("tiny", "fp32", 64, 1)) is None  # no saved entry


def steady(level, nights_=3, runs=3):
    """Nights at one level whose runs spread as the save's do (4%): no stretch of the host's own in any night."""
    return [[level * (1 + 0.04 * ((i % 3) - 1)) for i in range(runs)] for _ in range(nights_)]


def test_on_a_moved_host_the_nights_decide_only_where_as_measured_and_on_its_scale_agree():
    policy = Policy(nights=3)
    # 10% slower code on a host 15% faster than at the save: as measured the nights pass; on the host's scale they
    # show the slowdown.  Judged as measured only (before 0.8.0) they kept the case green for good.
    hidden = steady(1000.0 * 1.15 * 0.90)
    assert nights.judge(hidden, 1000.0, BASE_RUNS, 0.05).clears
    both = nights.judge(hidden, 1000.0, BASE_RUNS, 0.05, moved=1.15)
    assert not both.clears and not both.regression
    failed = settle(undecided(), policy, 2, both, "img/s")
    text = failed.reasons[-1].text
    assert failed.failed and text.startswith("fails: inconclusive 3 sessions in a row"), text
    assert "they pass as measured; on the host's scale (tonight it read 15% faster than at the save) they show it " \
           "below the threshold" in text, text
    assert text.endswith("save the baseline again on this host, or gate against pairs (--dlperf-against)"), text
    # Unchanged code on a host 15% slower: a regression as measured, a pass on its scale: not failed as a regression
    # (the never-deciding rule fails it, saying that the host moved).
    slower_host = nights.judge(steady(850.0), 1000.0, BASE_RUNS, 0.05, moved=0.85)
    assert slower_host.decision is ev.Decision.REGRESSION and not slower_host.regression
    assert settle(undecided(), policy, 2, slower_host, "img/s").reasons[-1].text.startswith("fails: inconclusive")
    # Both ways agreeing decide: 30% slower on the slower host fails as a regression, unchanged on a faster host clears.
    assert nights.judge(steady(850.0 * 0.7), 1000.0, BASE_RUNS, 0.05, moved=0.85).regression
    assert nights.judge(steady(1150.0), 1000.0, BASE_RUNS, 0.05, moved=1.15).clears


def test_tonight_s_evidence_gives_its_counted_runs_and_the_host_s_move():
    from pytest_dlperf.gate.figures import RunFigure

    figures = [RunFigure(i, v) for i, v in enumerate((1035.0, 1040.0))] + [RunFigure(2, 500.0, busy="90% CPU")]
    tonight = ev.Evidence(figures, None, ev.Decision.UNDECIDED, ev.StopReason.HOST_MOVED, moved=1.15)
    together = nights.with_tonight(steady(1035.0, 2), tonight, 1000.0, BASE_RUNS, 0.05)
    assert together.nights == 3 and together.estimate.runs == 8 and together.moved == 1.15  # the busy run left out
    assert not together.clears
    plain = nights.with_tonight(steady(1035.0, 2), dataclasses.replace(tonight, moved=None), 1000.0, BASE_RUNS, 0.05)
    assert plain.scaled is None and plain.clears
    # The results keep the move, and read it back (a night's record, a report rebuilt from the results).
    assert tonight.to_dict()["moved"] == 1.15 and ev.Evidence.from_dict(tonight.to_dict()).moved == 1.15
    assert "moved" not in dataclasses.replace(tonight, moved=None).to_dict()
