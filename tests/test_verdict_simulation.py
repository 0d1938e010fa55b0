"""benchmarks/verdict_simulation.py: the plugin's own sequential verdict fed simulated runs, reproducibly.

The figures are the script's output (benchmarks/README.md); these tests check that it runs the
plugin's loop, that a seed reproduces its table, and that the table's extremes are what any sound
gate gives: a case far below its threshold always fails, one far above it never does.
"""

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "verdict_simulation.py"


def load():
    spec = importlib.util.spec_from_file_location("verdict_simulation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def rows(text):
    """{(cv, ratio): (failed %, not confirmed %, inconclusive %, passed %, mean runs)} of the printed table (one
    offset and one stretch)."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip().rstrip("%") for c in line.split("|")]
        if len(cells) == 9 and cells[0].replace(".", "").isdigit():
            out[float(cells[0]), float(cells[3])] = tuple(float(c) for c in cells[4:])
    return out


def test_the_table_is_reproducible_and_its_extremes_are_sound(capsys):
    script = load()
    args = ["--cv", "0.01,0.05", "--ratios", "1.2,0.8", "--trials", "40", "--seed", "3"]
    assert script.main(args) == 0
    first = capsys.readouterr().out
    assert script.main(args) == 0
    assert capsys.readouterr().out.split("; ")[0] == first.split("; ")[0]  # all but the seconds
    table = rows(first)
    assert set(table) == {(1.0, 1.2), (1.0, 0.8), (5.0, 1.2), (5.0, 0.8)}
    for cv in (1.0, 5.0):
        assert table[cv, 0.8][0] == 100.0 and table[cv, 1.2][0] == 0.0
        assert table[cv, 0.8][4] >= 2.0  # a regression waits for a second run that agrees
    assert table[1.0, 1.2][4] == 1.0  # far above the threshold, at 1% noise: decided on the first run


def test_a_host_that_moves_by_stretches_fails_unchanged_code_less_with_the_stretch_rule(capsys):
    # Each run of the save in a stretch of its own, a session's runs in one together, 20% apart: against the save's
    # spread alone (verdict_rules 10) a tight session in a slow stretch failed; the stretch rule keeps it undecided.
    script = load()
    args = ["--cv", "0.02", "--stretch", "0.2", "--ratios", "1.0", "--trials", "60", "--seed", "5"]
    from pytest_dlperf.gate import evidence

    rule = evidence.excess_variance
    assert script.main([*args, "--no-stretch-rule"]) == 0
    assert evidence.excess_variance is rule  # the side by side restores the plugin's rule
    before = rows(capsys.readouterr().out)[2.0, 1.0][0]
    assert script.main(args) == 0
    after = rows(capsys.readouterr().out)[2.0, 1.0][0]
    assert after < before and after <= 5.0, (before, after)


def test_the_issue_43_checks_hold_at_a_quick_size():
    # The full size is `verdict_simulation.py --acceptance --trials 4000` (benchmarks/results/); here 300 trials a
    # check, each bound the binomial's 99.9% quantile around its target, so a sound gate never trips it.
    from scipy import stats

    script = load()
    trials = 300
    by_what = {what: (setting, ratio) for what, setting, ratio, *_ in script.checks(trials)}
    rng = script.np.random.default_rng(43)

    def failed(what):
        setting, ratio = by_what[what]
        got = script.shares(rng, setting, ratio, trials)
        return got["fail"] * trials / 100, (got["fail"] + got["inconclusive"]) * trials / 100

    most = lambda p: stats.binom.ppf(0.999, trials, p)  # noqa: E731
    least = lambda p: stats.binom.ppf(0.001, trials, p)  # noqa: E731
    assert failed("at the tolerance boundary (0.95), CV 5%, no offset, prior")[0] <= most(0.01)
    assert failed("unchanged, CV 5%, 5% session offset, history of 10 nights")[0] <= most(0.02)
    assert failed("twice the tolerance (0.90), CV 2%, no offset, prior: failed")[0] >= least(0.90)
    assert failed("twice the tolerance (0.90), CV 5%, no offset, prior: not passed")[1] >= least(0.90)
    # Three nights against one saved baseline, the third inconclusive night in a row failing
    # (dlperf_inconclusive_nights = 3): 120 trials of three nights.
    setting, ratio = by_what["twice the tolerance (0.90), CV 5%, no offset, prior: failed within 3 nights"]
    assert script.shares(rng, setting, ratio, 120, 3)["fail"] * 120 / 100 >= stats.binom.ppf(0.001, 120, 0.90)


def test_bad_options_are_one_usage_line(capsys):
    script = load()
    for args in (["--cv", "x"], ["--trials", "0"], ["--max-runs", "1", "--first-runs", "2"], ["--history", "1"]):
        with pytest.raises(SystemExit) as exited:
            script.main(args)
        assert exited.value.code == 2 and "error: " in capsys.readouterr().err


def test_the_both_errors_table_has_a_row_per_verdict_noise_and_offset():
    """Issue 53: one table of both errors (unchanged FAIL; FAIL / PASS / INCONCLUSIVE at 1 and 2 tolerances), for a
    stored baseline, a history of 10 nights and pairs, at CV 0.5/2/5% and offsets 0/2/5%; each row held to the
    promise."""
    module = load()
    lines = []
    met = module.both_errors(1, 0, out=lines.append)
    assert len(met) == 27 and all(isinstance(m, bool) for m in met)
    rows = [line for line in lines if line.startswith(("stored ", "history ", "paired "))]
    assert len(rows) == 27 and rows[0].startswith("stored   | 0.5% |     0% |")
    assert rows[-1].startswith("paired   |   5% |     5% |")
    assert rows[-1].endswith("| met") or re.search(r"\| not met: .+ \d+\.\d%$", rows[-1]), rows[-1]
    # A row that misses says which part, to one decimal: a FAIL share of 89.5% misses 90% though printed as 90.
    assert module._missed({"fail": 0.0}, {"fail": 89.5, "pass": 0.0}) == ["twice FAIL 89.5%"]
    assert module._missed({"fail": 1.5}, {"fail": 95.0, "pass": 2.0}) == ["unchanged FAIL 1.5%", "twice PASS 2.0%"]
    assert module._missed({"fail": 1.0}, {"fail": 90.0, "pass": 1.0}) == []
    assert lines[-1].startswith("promise: unchanged FAIL <= 1%, twice the tolerance PASS <= 1% and FAIL >= 90%; met in ")


def test_a_paired_session_cancels_its_offset_and_ignores_the_candidate_s_own_probe():
    """Pairs see one session's offset on both sides; a candidate whose change also lowers its memory probe is
    judged on its throughput alone."""
    module = load()
    rng = np.random.default_rng(4)
    steady = module.Setting(0.005, 0.3)  # a 30% session offset: against a stored baseline, a certain false alarm
    assert [module.paired_trial(rng, steady, 1.0)[0] for _ in range(3)] == ["pass"] * 3
    assert [module.paired_trial(rng, steady, 0.85)[0] for _ in range(3)] == ["fail"] * 3
