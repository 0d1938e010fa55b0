"""A host that moved since its baseline was saved (issue 53, pytest_dlperf.gate.host): the controller's own probe
between runs, and a case judged as measured and on the host's scale, decided only where both agree."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import pytest

from pytest_dlperf.gate import evidence as ev
from pytest_dlperf.gate import host
from pytest_dlperf.gate.figures import RunFigure
from pytest_dlperf.gate.sequential import SAVE_RUNS, Budget, measure_until_decided
from pytest_dlperf.gate.verdict import judge_evidence
from pytest_dlperf.reporting.verdicts import render
from pytest_dlperf.results.case import Expected, Status
from pytest_dlperf.results.runs import Attempt, RunRecord
from pytest_dlperf.gate.stats import summarize

#: A save as --dlperf-save-baseline makes one: SAVE_RUNS runs 2% apart, and the host probe after each, 2% apart.
SAVED = [1000.0 * (1 + 0.02 * ((i % 5) - 2) / 2) for i in range(SAVE_RUNS)]
HOSTS = tuple(10.0 * (1 + 0.02 * (((i + 2) % 5) - 2) / 2) for i in range(SAVE_RUNS))
BASE = Expected(1000.0, "img/s", 0.05, "test", host_runs=HOSTS)


def runs_on(host_speed: float, code: float, count: int = 10):
    """A session's runs: the code's speed (1.0: unchanged) on a host that reads ``host_speed`` of the save's, each
    run 1% from the next, and the controller's probe after it."""
    def one(index: int) -> Attempt:
        wobble = 1 + 0.01 * ((index % 3) - 1)
        value = 1000.0 * host_speed * code * wobble
        run = RunRecord.from_dict({"index": index, "windows": [{"throughput": value}], "wall_seconds": 0.01,
                                   "host_probe": {"index": 10.0 * host_speed * (1 + 0.005 * ((index % 2) - 0.5))}})
        return Attempt(summarize([value]), "img/s", [run], {}, [])
    return one


def judged(host_speed: float, code: float, expected: Expected = BASE):
    _, evidence = measure_until_decided(runs_on(host_speed, code), expected, SAVED, Budget(max_runs=10),
                                        sleep=lambda s: None)
    return evidence, judge_evidence("x", evidence, "img/s", expected)


def test_a_move_within_the_readings_noise_or_the_floor_is_no_move():
    figures = [RunFigure(i, 1000.0, host=10.0 * (1 + 0.01 * (i % 2))) for i in range(3)]
    assert host.moved(figures, HOSTS, 0.05) is None
    assert host.moved([dataclasses.replace(f, host=f.host * 0.98) for f in figures], HOSTS, 0.05) is None  # floor
    assert host.moved(figures, None, 0.05) is None and host.moved([RunFigure(0, 1.0)], HOSTS, 0.05) is None
    busy = [dataclasses.replace(f, host=f.host * 0.8, busy="other processes used 90% CPU") for f in figures]
    assert host.moved(busy, HOSTS, 0.05) is None  # a busy run's reading is the neighbour's
    move = host.moved([dataclasses.replace(f, host=f.host * 0.85) for f in figures], HOSTS, 0.05)
    assert move.ratio == pytest.approx(0.855, abs=0.01) and move.line().startswith(
        "the host moved: its own probe (a process of its own between runs) reads 15% slower than when the baseline")


def test_the_probe_s_faster_move_needs_fewer_standard_errors_than_a_slower_one():
    # One run's reading against a save spread 3%: 7.5% off is beyond 2 standard errors and within 3.  Faster only
    # withholds a pass (its scaled runs are lower), so it counts; slower would excuse a FAIL, so it does not.
    saved = tuple(10.0 * (1 + 0.03 * d) for d in (-1, 1, -1, 1, 0, -1, 1, -1, 1, 0))
    faster = host.moved([RunFigure(0, 1000.0, host=10.0 * 1.075)], saved, 0.05)
    assert faster is not None and faster.ratio == pytest.approx(1.075, rel=0.01)
    assert host.moved([RunFigure(0, 1000.0, host=10.0 / 1.075)], saved, 0.05) is None
    assert host.moved([RunFigure(0, 1000.0, host=10.0 / 1.12)], saved, 0.05) is not None  # beyond 3 of them


def test_two_ways_decide_only_where_they_agree():
    d = ev.Decision
    assert host.combined(d.REGRESSION, d.REGRESSION) == (d.REGRESSION, False)
    assert host.combined(d.PASS, d.IMPROVED) == (d.PASS, False)
    assert host.combined(d.REGRESSION, d.PASS) == (d.UNDECIDED, True)
    assert host.combined(d.IMPROVED, d.REGRESSION) == (d.UNDECIDED, True)
    assert host.combined(d.REGRESSION, d.UNDECIDED) == (d.UNDECIDED, False)


def test_unchanged_code_on_a_host_15_percent_slower_is_inconclusive_saying_so_not_a_fail():
    evidence, judgement = judged(0.85, 1.0)
    assert evidence.stopped == ev.StopReason.HOST_MOVED and judgement.status is Status.INCONCLUSIVE
    message = render(judgement)
    assert "reads 15% slower than when the baseline was saved" in message, message
    assert "save the baseline again on this host, or judge against the last good build in pairs" in message


@pytest.mark.parametrize("host_speed, code", [(0.85, 0.7), (0.85, 0.9), (1.0, 0.9), (1.12, 0.7)])
def test_a_slowdown_beyond_the_hosts_move_fails_both_ways(host_speed, code):
    assert judged(host_speed, code)[1].status is Status.FAIL


def test_a_slowdown_hidden_by_a_faster_host_never_passes():
    evidence, judgement = judged(1.12, 0.9)  # 0.9 x 1.12: about the baseline as measured
    assert judgement.status is Status.INCONCLUSIVE and evidence.stopped == ev.StopReason.HOST_MOVED


def test_an_unchanged_host_and_a_save_without_readings_judge_as_before():
    for expected in (BASE, dataclasses.replace(BASE, host_runs=None)):
        evidence, judgement = judged(1.0, 1.0, expected)
        assert judgement.status is Status.PASS and not any("host moved" in p for p in evidence.probes)
    evidence, judgement = judged(0.85, 1.0, dataclasses.replace(BASE, host_runs=None))
    assert judgement.status is Status.FAIL  # without the save's readings, as before: the host's move reads as code


def test_the_controllers_probe_is_a_process_of_its_own(tmp_path):
    from pytest_dlperf.controller.runner import Runner

    reading = Runner.probe_host(None)
    assert reading["memory_gbs"] > 0 and reading["core_gflops"] > 0
    assert reading["index"] == pytest.approx((reading["memory_gbs"] * reading["core_gflops"]) ** 0.5, rel=1e-3)


def test_a_save_keeps_the_hosts_readings_and_a_session_against_it_reads_its_own(dlperf):
    """End to end, with the busy rule on (at a threshold no neighbour reaches, so no run is busy on a loaded test
    host): the save's entry keeps a reading per counted run, and each run of a later session has its own."""
    quiet = ("-o", "dlperf_max_interference=100000")
    saved = dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "2", "--dlperf-save-baseline", "b.json", *quiet)
    assert saved.ret == 0, saved.stdout.str()
    (entry,) = json.loads((dlperf.path / "b.json").read_text())["cases"]
    assert len(entry["host_runs"]) == 2 and all(v > 0 for v in entry["host_runs"])
    # At most 2 runs: what is read is each run's probe, never the verdict, and against a save of 2 runs a loaded
    # host's tiny at the default 5% tolerance could stay undecided up to the default 10 runs, each with its probe.
    judged = dlperf.run("--dlperf-baseline", "b.json", "--dlperf-json", "r.json", "--dlperf-max-runs", "2", *quiet)
    (case,) = dlperf.results("r.json")["cases"]
    assert case["baseline"]["host_runs"] == entry["host_runs"], judged.stdout.str()
    runs = [run for attempt in case["attempts"] for run in attempt["runs"]]
    assert runs and all(run["host_probe"]["index"] > 0 for run in runs)
    assert all(figure["host"] > 0 for figure in case["evidence"]["runs"])


#: A save whose runs' own probes read 45 GFLOP/s and 6.4 GB/s, 3% apart (its spread), and no controller readings.
PROBED = dataclasses.replace(BASE, host_runs=None, memory_gbs=6.4, core_gflops=45.0)
PROBE_RUNS = {"memory_gbs": (6.2, 6.4, 6.6), "core_gflops": (43.6, 45.0, 46.4)}


def probed_runs(probes: float, code: float, host_speed: float = 1.0):
    """A session's runs whose own probes read ``probes`` of the save's (the controller's probe: none)."""
    def one(index: int) -> Attempt:
        value = 1000.0 * host_speed * code * (1 + 0.01 * ((index % 3) - 1))
        run = RunRecord.from_dict({"index": index, "windows": [{"throughput": value}], "wall_seconds": 0.01,
                                   "interference": {"memory_gbs": 6.4 * probes, "core_gflops": 45.0 * probes}})
        return Attempt(summarize([value]), "img/s", [run], {}, [])
    return one


def probed(probes: float, code: float, host_speed: float = 1.0):
    _, evidence = measure_until_decided(probed_runs(probes, code, host_speed), PROBED, SAVED, Budget(max_runs=10),
                                        sleep=lambda s: None, probe_runs=PROBE_RUNS)
    return evidence, judge_evidence("x", evidence, "img/s", PROBED)


def test_runs_whose_own_probes_read_faster_never_pass_a_slowdown_the_faster_host_hides():
    """The save in a slow stretch: a slowdown of twice the tolerance reads above the baseline as measured, on a host
    whose runs' probes read 40% faster; judged on their scale too, it does not pass."""
    evidence, judgement = probed(1.4, 0.9, host_speed=1.3)
    assert judgement.status is Status.INCONCLUSIVE and evidence.stopped == ev.StopReason.HOST_MOVED
    assert "the runs' own probes of its memory and cores (timed between windows) read 40% faster" in \
        render(judgement)


@pytest.mark.parametrize("probes, code, status", [(0.6, 0.7, Status.FAIL), (0.6, 1.0, Status.PASS),
                                                  (1.4, 0.7, Status.FAIL), (1.0, 1.0, Status.PASS),
                                                  (1.05, 1.0, Status.PASS)])
def test_runs_own_probes_only_withhold_a_pass_and_only_when_faster(probes, code, status):
    """Slower probes (the code's own work can lower them) change no verdict; faster ones never turn a FAIL; within
    their reach (10%, or 3 x their spread) they are no move."""
    evidence, judgement = probed(probes, code)
    assert judgement.status is status and evidence.stopped != ev.StopReason.HOST_MOVED


def test_a_save_whose_probes_spread_widely_still_withholds_a_pass_from_a_host_faster_on_average():
    """A save on a host that flips between two speeds: its runs' probes spread widely (10 runs, 0.7x to 1.15x), so
    one session run far from its median is no move, but a session whose runs all read 30% faster than its mean is.
    Two runs with the same shift that decide nothing alone: within the noise, no move (the pass stands)."""
    spread = [0.7, 1.15, 0.9, 1.1, 0.75, 1.12, 0.95, 1.05, 0.8, 1.1]
    readings = {"memory_gbs": tuple(6.4 * v for v in spread), "core_gflops": tuple(45.0 * v for v in spread)}
    mean = math.exp(statistics.fmean(math.log(v) for v in spread))
    faster = [RunFigure(i, 1000.0, bandwidth=6.4 * mean * 1.3 * (1 + 0.02 * (i % 2)),
                        core=45.0 * mean * 1.3 * (1 + 0.02 * (i % 2))) for i in range(6)]
    move = host.probes_faster(faster, {}, readings, None, 0.05)
    assert move is not None and move.ratio == pytest.approx(1.31, abs=0.02) and (move.runs, move.saved_runs) == (6, 10)
    assert host.probes_faster(faster[:1], {}, readings, None, 0.05) is None
    assert host.probes_faster(faster, {}, readings, {"memory_gbs": None, "core_gflops": None}, 0.05) is None  # a GPU
    slower = [dataclasses.replace(f, bandwidth=f.bandwidth / 1.7) for f in faster]  # one probe slower: no move
    assert host.probes_faster(slower, {}, readings, None, 0.05) is None
