"""A/B sessions (--dlperf-against, docs/ab.md): the paired statistics, the seeded order, what REF may be, the
refusals, and one shared inner session of two git revisions: the verdict, the results, report and history."""

from __future__ import annotations

import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_dlperf.ab import report, sides
from pytest_dlperf.ab.launcher import SideLauncher
from pytest_dlperf.ab.pairs import measure_pairs
from pytest_dlperf.cases import OptionError
from pytest_dlperf.gate import evidence as ev
from pytest_dlperf.gate import paired
from pytest_dlperf.gate.figures import RunFigure
from pytest_dlperf.gate.sequential import Budget
from pytest_dlperf.launch.launchers import LocalLauncher

# --------------------------------------------------------------------------- the statistics


def pair(index: int, candidate: float, reference: float = 100.0, busy: str | None = None) -> paired.Pair:
    return paired.Pair(index, paired.pair_order(1, index)[0], RunFigure(index, candidate, busy),
                       RunFigure(index, reference))


def test_a_pair_decision_pays_for_its_looks_as_a_stored_baseline_does():
    # Ten pairs 8% slower with little spread: a regression at the last look of ten, not at the first of ten
    # (O'Brien-Fleming-like spending keeps almost all of the 1% for the later looks), and the same at one look of one.
    pairs = [0.92, 0.925, 0.915, 0.92, 0.918, 0.922, 0.919, 0.921, 0.92, 0.917]
    est = paired.estimate(pairs, 0.05)
    assert ev.decide(est, 0.05, look=10, looks=10) is ev.Decision.REGRESSION
    assert ev.decide(est, 0.05, look=1, looks=1) is ev.Decision.REGRESSION
    few = paired.estimate(pairs[:2], 0.05)
    assert ev.decide(few, 0.05, look=2, looks=10) is not ev.Decision.REGRESSION


def test_the_order_of_each_pair_is_drawn_from_the_seed_alone():
    orders = [paired.pair_order(7, i) for i in range(200)]
    assert orders == [paired.pair_order(7, i) for i in range(200)]  # reproducible from the recorded seed
    assert {o for o in orders} == {("candidate", "reference"), ("reference", "candidate")}
    assert 70 < sum(o[0] == "candidate" for o in orders) < 130
    assert orders != [paired.pair_order(8, i) for i in range(200)]


def test_the_estimate_is_the_geometric_mean_of_the_ratios_against_one():
    est = paired.estimate([0.9, 0.92, 0.94], 0.05)
    assert est.value == pytest.approx(math.exp(sum(map(math.log, (0.9, 0.92, 0.94))) / 3))
    assert est.baseline == 1.0 and est.runs == 3 and est.low < est.value < est.high
    assert est.dof == 2 + ev.PRIOR_DOF  # the prior of a tolerance set by hand, worth 3 pairs, as today's verdict


@pytest.mark.parametrize(("ratios", "decision"), [
    ([0.80, 0.81], ev.Decision.REGRESSION), ([1.0, 1.01], ev.Decision.PASS), ([1.3, 1.31], ev.Decision.IMPROVED),
    ([0.80], ev.Decision.UNDECIDED), ([1.3], ev.Decision.UNDECIDED),  # any decision needs two counted pairs
    ([0.88, 0.99], ev.Decision.UNDECIDED),
    # Noisy pairs whose interval reaches below the threshold: no pass, though it rules out 2.25 x the tolerance.
    ([1.02, 0.93, 1.06, 0.95, 1.0, 0.97], ev.Decision.UNDECIDED)])
def test_what_the_pairs_decide(ratios, decision):
    assert paired.judge([pair(i, 100 * r) for i, r in enumerate(ratios)], 0.05, min_pairs=2)[1] is decision


def test_a_busy_pair_is_no_evidence_and_the_evidence_reads_back():
    pairs = [pair(0, 50.0, busy="other processes used 180% CPU"), pair(1, 100.0), pair(2, 101.0)]
    est, decision = paired.judge(pairs, 0.05, min_pairs=2)
    assert est.runs == 2 and decision is ev.Decision.PASS
    assert pairs[0].busy == "the candidate's run: other processes used 180% CPU"
    found = paired.PairedEvidence(7, 0.05, pairs, est, decision)
    again = paired.PairedEvidence.from_dict(json.loads(json.dumps(found.to_dict())))
    assert again.to_dict() == found.to_dict() and again.side_mean("candidate") == pytest.approx(math.sqrt(100 * 101))


def script(values):
    """A measure_pair that replays ``values`` (candidate figure, busy) against a reference of 100, and the orders."""
    orders = []

    def measure_pair(index, order):
        orders.append(order)
        value, busy = values[index]
        return paired.Pair(index, order[0], RunFigure(index, value, busy), RunFigure(index, 100.0))

    return measure_pair, orders


@pytest.mark.parametrize(("values", "pairs", "stopped", "decision"), [
    ([(80, None), (80.5, None), (80.2, None), (80.4, None)], 4, ev.StopReason.DECIDED, ev.Decision.REGRESSION),
    ([(80, None), (90, None), (99, None), (94, None)], 3, ev.StopReason.MAX_RUNS, ev.Decision.UNDECIDED),
    ([(80, "busy"), (80, "busy"), (80, None)], 2, ev.StopReason.BUSY, ev.Decision.UNDECIDED),
    # A busy pair before the counted ones is no look (its look once ran past the pairs counted: a ZeroDivisionError).
    ([(80, "busy"), (93, None), (99, None), (96, None)], 4, ev.StopReason.MAX_RUNS, ev.Decision.UNDECIDED)])
def test_the_pairs_stop_by_the_sequential_rules(values, pairs, stopped, decision):
    measure_pair, orders = script(values)
    found = measure_pairs(measure_pair, Budget(1, max(3, pairs)), 0.05, seed=11, sleep=lambda s: None)
    assert (len(found.pairs), found.stopped, found.decision) == (pairs, stopped, decision)
    assert orders == [paired.pair_order(11, i) for i in range(pairs)]


@pytest.mark.parametrize(("max_pairs", "decided_at"), [(4, paired.MIN_PAIRS), (3, 3), (2, 2)])
def test_a_decision_waits_for_four_counted_pairs_or_all_the_user_allows(max_pairs, decided_at):
    measure_pair, _ = script([(50, None), (50.5, None), (50.2, None), (50.4, None), (50.1, None)])
    found = measure_pairs(measure_pair, Budget(1, max_pairs), 0.05, seed=11, sleep=lambda s: None)
    assert (len(found.pairs), found.decision) == (decided_at, ev.Decision.REGRESSION)


def test_three_pairs_that_agree_decide_nothing_where_more_are_allowed():
    assert paired.judge([pair(i, 50.0 + i / 10) for i in range(3)], 0.05, min_pairs=paired.MIN_PAIRS)[1] \
        is ev.Decision.UNDECIDED


def test_a_pair_s_prior_spread_is_sqrt_2_times_a_run_s():
    # Two pairs that agree exactly: the spread is the prior's alone, that of a log ratio of two runs.
    est = paired.estimate([0.9, 0.9], 0.05)
    prior_share = math.sqrt(ev.PRIOR_DOF / (ev.PRIOR_DOF + 1))  # the prior's dof beside the pairs' one
    assert est.sigma == pytest.approx(prior_share * math.sqrt(2) * ev.prior_sigma(0.05), rel=1e-9)


def probed(index: int, ratio: float, probe: float) -> paired.Pair:
    """A pair whose candidate saw ``probe`` x the reference's memory bandwidth."""
    return paired.Pair(index, "candidate", RunFigure(index, 100 * ratio, bandwidth=10 * probe),
                       RunFigure(index, 100.0, bandwidth=10.0))


# Ten pairs 8% slower whose candidate lowered its own memory probe 8% (its own threads, its memory binding).
PROBES = [0.9, 1.1, 0.95, 1.05, 0.85, 1.12, 0.92, 1.0, 0.97, 0.99]
NOISE = [0.004, -0.003, 0.002, -0.004, 0.003, 0.0, -0.002, 0.004, -0.001, -0.003]


def test_the_candidate_s_own_memory_probe_never_excuses_its_slowdown():
    # A regression on the probe would read the pairs at equal probes: the candidate's own 8% taken for the host's.
    pairs = [probed(i, 0.92 * z ** 0.1 * math.exp(e), 0.92 * z) for i, (z, e) in enumerate(zip(PROBES, NOISE))]
    est, decision = paired.judge(pairs, 0.05)
    plain = math.exp(statistics.fmean(math.log(p.ratio) for p in pairs))
    assert est.value == pytest.approx(plain, rel=1e-12) and est.value < 0.95 and decision is ev.Decision.REGRESSION
    evidence = paired.PairedEvidence(3, 0.05, pairs, est, decision)
    assert "adjustment" not in evidence.to_dict()
    assert not any("memory bandwidth" in line for line in report.lines("vq", evidence, "torch a", [], "img/s"))


def test_the_budget_is_pairs_never_time_so_a_slower_build_gets_as_many():
    clock = iter(range(0, 100_000, 1000))  # every pair takes 1,000 s
    measure_pair, _ = script([(88, None), (104, None)] * 5)  # 4% slower, pairs 8% apart: undecided in 10 pairs
    found = measure_pairs(measure_pair, Budget(1, 10), 0.05, 3, sleep=lambda s: None, clock=lambda: next(clock))
    assert found.stopped is ev.StopReason.MAX_RUNS and len(found.pairs) == 10


# --------------------------------------------------------------------------- what REF may be, and the refusals


def test_what_the_reference_may_be(tmp_path):
    assert sides.parse(sys.executable, tmp_path).kind == sides.INTERPRETER
    with_env = sides.parse(f"env AB_LAYERS=3 {sys.executable}", tmp_path)
    assert (with_env.kind, with_env.forkable, with_env.variables) == (sides.INTERPRETER, True, {"AB_LAYERS": "3"})
    wrapper = tmp_path / "python-in-box"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    assert (sides.parse(str(wrapper), tmp_path).kind, sides.parse(str(wrapper), tmp_path).forkable) == \
        (sides.COMMAND, False)  # a script may set what a forked worker would not get: fresh runs
    command = sides.parse("env -u PYTHONPATH python3 -I", tmp_path)
    assert (command.kind, command.python) == (sides.COMMAND, ("env", "-u", "PYTHONPATH", "python3", "-I"))
    with pytest.raises(OptionError, match=r"^--dlperf-against: 'v9\.9' is no executable file, no command on PATH "
                                          r"and no git revision of "):
        sides.parse("v9.9", tmp_path)
    with pytest.raises(OptionError, match=r"^--dlperf-against: 'no-such-docker' \(the first word of"):
        sides.parse("no-such-docker run img python", tmp_path)


def test_a_reference_without_the_worker_is_refused_in_one_line_naming_the_install(tmp_path):
    bare = tmp_path / "bare-python"  # a real interpreter that sees no site-packages and no PYTHONPATH
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    side = sides.parse(str(bare), tmp_path)
    line = sides.refusal(side, sides.probe(side, tmp_path), "0.1.0")
    assert line.startswith(f"--dlperf-against {bare}: cannot run the worker: torch, psutil, numpy, pytest_dlperf "
                           "not importable there; install it there first: ")
    assert line.endswith(" -m pip install pytest-dlperf==0.1.0") and "\n" not in line
    assert sides.refusal(side, {"missing": ["pytest_dlperf"], "executable": "/v/bin/python"}, "0.1.0").endswith(
        "/v/bin/python -m pip install pytest-dlperf==0.1.0 --no-deps")  # the rest is there: nothing else
    # From a clone (pytest-dlperf is not on PyPI): the checkout this session runs from.
    assert sides.source_tree() == str(Path(sides.__file__).resolve().parents[2])
    assert sides.refusal(side, {"missing": ["pytest_dlperf"], "executable": "/v/bin/python"}, "0.1.0",
                         "/src/pytest dlperf").endswith("/v/bin/python -m pip install '/src/pytest dlperf' --no-deps")


def test_the_session_refuses_such_a_reference_before_any_case_runs(dlperf):
    bare = dlperf.path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-against", str(bare))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if "--dlperf-against" in line]
    assert len(errors) == 1 and "cannot run the worker" in errors[0]
    assert errors[0].endswith(f"-m pip install {shlex.quote(sides.source_tree())}")  # this session's checkout
    assert not (dlperf.path / "results.json").exists()
    saving = dlperf.run("--dlperf-model", "tiny", "--dlperf-against", sys.executable,
                        "--dlperf-save-baseline", "b.json")
    assert saving.ret == pytest.ExitCode.USAGE_ERROR and "saves no baseline" in saving.stderr.str()


def test_a_side_runs_its_own_interpreter_and_a_fork_server_of_it(tmp_path):
    other = sides.Side("reference", sides.INTERPRETER, "/v/bin/python", ("/v/bin/python",), True, (("X", "1"),))
    plan = SideLauncher(LocalLauncher(), other, fork=True).plan(1, "cpu", tmp_path)
    assert plan.command[0] == "/v/bin/python" and plan.python == "/v/bin/python" and plan.env == {"X": "1"}
    assert plan.fork == ("pytest_dlperf.worker",)
    command = sides.Side("reference", sides.COMMAND, "docker run i python", ("docker", "run", "i", "python"), False)
    plan = SideLauncher(LocalLauncher(), command, fork=False).plan(1, "cpu", tmp_path,
                                                                   program=["sh", "-c", f"{sys.executable} t.py"])
    assert plan.fork is None and plan.command == ["sh", "-c", "docker run i python t.py"]  # a command case's {python}
    mine = SideLauncher(LocalLauncher(), sides.candidate(False), fork=False).plan(1, "cpu", tmp_path)
    assert mine.command[0] == sys.executable and mine.fork is None and mine.python is None


def test_the_headline_and_what_differs():
    est = ev.Estimate(0.929, 0.911, 0.947, 4, 0.01, 7, 1.0)
    found = paired.PairedEvidence(5, 0.05, [], est, ev.Decision.REGRESSION)
    cand = {"versions": {"torch": "2.12.0+cu130", "python": "3.11.7"}, "git": {"commit": "b" * 40}}
    ref = {"versions": {"torch": "2.11.0+cu130", "python": "3.11.7"}, "git": {"commit": "a" * 40}}
    line = report.headline("resnet50-amp-bs256-gpu1", found, report.stacks(cand, ref))
    assert line == ("resnet50-amp-bs256-gpu1: 7.1% slower than the reference (98% CI -8.9..-5.3%, 4 pairs): "
                    "candidate torch 2.12.0+cu130, reference torch 2.11.0+cu130")
    assert report.differences(cand, ref, "cpu") == ["torch 2.11.0+cu130 -> 2.12.0+cu130", "git aaaaaaa..bbbbbbb"]


# --------------------------------------------------------------------------- a session: two git revisions

MODEL = '''
import torch
from torch import nn
from pytest_dlperf import register_model

LAYERS = {layers}


@register_model("abnet", task="regression", batch_size=64, defaults={{"in_features": 64, "out_features": 4}})
def abnet(settings):
    """LAYERS layers of 256 units: the work of a step grows with them."""
    inner = [m for _ in range(LAYERS) for m in (nn.Linear(256, 256), nn.ReLU())]
    return nn.Sequential(nn.Linear(64, 256), *inner, nn.Linear(256, 4))
'''


def two_revisions(dlperf):
    """A project whose working copy's model does about twelve times the work of its committed one's: a slowdown no
    pair beside the suite's own load hides (a pair hit by a burst of it read 0.9 where the others read 0.2)."""
    git = ["git", "-C", str(dlperf.path), "-c", "user.email=t@t", "-c", "user.name=t"]
    (dlperf.path / "conftest.py").write_text(MODEL.format(layers=2))
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "conftest.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "two layers"], check=True)
    (dlperf.path / "conftest.py").write_text(MODEL.format(layers=24))


@pytest.fixture
def revisions(shared_run):
    return shared_run("ab-git", "--dlperf-model", "abnet", "--dlperf-against", "HEAD", "-o", "dlperf_against_seed=5",
                      "--dlperf-max-runs", "3", "--dlperf-json", "results.json", "--dlperf-report", "report.md",
                      "--dlperf-history", "history.db", "--dlperf-plot", "plots", setup=two_revisions)


def test_the_working_copy_against_its_last_commit_fails_slower(revisions):
    out = revisions.result.stdout.str()
    assert revisions.result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "FAIL abnet-fp32-bs64-gpu1: " in out and "% slower than the reference (98% CI " in out, out
    assert "what differs: git " in out and "+dirty" in out  # the working copy against its commit
    assert "dlperf: A/B against git HEAD (" in out and "; seed 5; runs forked by a server of each side)" in out
    tester = revisions.tester
    listed = subprocess.run(["git", "-C", str(tester.path), "worktree", "list"], capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1  # the reference's worktree is gone


def test_the_results_record_the_seed_the_pairs_in_its_order_and_both_environments(revisions):
    document = revisions.tester.results()
    against = document["against"]
    assert against["seed"] == 5 and against["reference"]["kind"] == "git" and against["forked"] is True
    assert against["reference_environment"]["git"]["dirty"] is False
    assert against["candidate_environment"]["git"]["dirty"] is True
    case = document["cases"][0]
    assert case["verdict"] == "fail" and case["paired"]["seed"] == 5 and case["paired"]["decision"] == "regression"
    pairs = case["paired"]["pairs"]
    assert 2 <= len(pairs) <= 3
    assert [p["first"] for p in pairs] == [paired.pair_order(5, i)[0] for i in range(len(pairs))]
    assert case["baseline"]["throughput"] == pytest.approx(case["paired"]["reference"])
    assert case["paired"]["estimate"]["value"] < 0.8  # twelve times the layers: far slower
    assert len(case["attempts"]) == 2 and {r["log_dir"].split(os.sep)[-2] for r in case["attempts"][0]["runs"]} == \
        {"reference"}


def test_the_report_has_the_ab_section_and_the_history_keeps_the_session_apart(revisions):
    text = (revisions.tester.path / "report.md").read_text()
    section = text[text.index("## A/B: candidate against reference"):]
    assert "| abnet-fp32-bs64-gpu1 | FAIL | 0." in section and "Pairs of abnet-fp32-bs64-gpu1 (samples/s):" in section
    from pytest_dlperf.history.store import open_store

    with open_store(str(revisions.tester.path / "history.db")) as store:
        assert store.points() == []  # never a night of either side
        kept = store.points(ab=True)
    assert len(kept) == 1 and kept[0].session.against == "git HEAD" and kept[0].case.verdict == "fail"
    assert "A/B session (against git HEAD" in revisions.result.stdout.str()
    assert (revisions.tester.path / "plots" / "ab-ratios.png").stat().st_size > 0  # each pair's ratio, the interval


def test_the_option_is_documented():
    from pytest_dlperf.options import option_reference

    assert "`--dlperf-against REF`" in option_reference() and "| `dlperf_against_seed` | N |" in option_reference()
    assert textwrap  # noqa: B018 - used by the session's conftest text above


def test_the_benchmark_is_wired(tmp_path, capsys):
    """benchmarks/ab_quality.py: its faster reference is an interpreter with its own variable (a fork server of its
    own), the candidate 10% more work; its table prints (a zero-session run; the smoke is --sessions 1)."""
    import argparse
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "ab_quality.py"
    spec = importlib.util.spec_from_file_location("ab_quality", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    opts = argparse.Namespace(cost=20, neighbour_sessions=1, neighbour_duty=0.5, model="vq", more_work=0.1)
    found = {name: (cost, against, beside, extra) for name, cost, against, beside, extra in
             bench.kinds(opts, bench.verdict_quality().NEIGHBOUR)}
    assert set(found) == {"A/A", "faster-ref", "A/A+neighbour", "A/A+tenant"}
    cost, against, _, _ = found["faster-ref"]
    side = sides.parse(against, tmp_path)
    assert (cost, side.kind, side.variables) == ({"DLPERF_VQ_COST": "22"}, sides.INTERPRETER, {"DLPERF_VQ_COST": "20"})
    assert found["A/A+neighbour"][3] == ["-o", "dlperf_max_interference=off"] and found["A/A+tenant"][2]
    assert bench.main(["--sessions", "0", "--neighbour-sessions", "0"]) == 0
    assert "pairs/verdict" in capsys.readouterr().out


def test_the_simulation_of_the_stopping_rules_runs(capsys):
    from benchmarks import ab_simulation

    assert ab_simulation.main(["--noise", "0.05", "--max-pairs", "10", "--min-pairs", "4", "--trials", "20"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 4 and "-9.1%" in printed


def test_the_rejudge_replays_kept_pairs(tmp_path, capsys):
    from benchmarks import ab_rejudge

    pairs = [probed(i, 0.92 * math.exp(e), z) for i, (z, e) in enumerate(zip(PROBES, NOISE))]
    document = {"cases": [{"paired": paired.PairedEvidence(5, 0.05, pairs, None, ev.Decision.REGRESSION).to_dict()}]}
    (tmp_path / "faster-ref-1.json").write_text(json.dumps(document))
    assert ab_rejudge.main([str(tmp_path / "faster-ref-1.json")]) == 0
    assert "today: regression at" in capsys.readouterr().out
