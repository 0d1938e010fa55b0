"""Multi-rank cases on the local launcher: real torchrun, real gloo, real DDP, on the CPU."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_dlperf import jsonio
from pytest_dlperf.worker.distributed import Ranks, global_windows, ranks_from_env
from pytest_dlperf.launch.launchers import LocalLauncher, MpiLauncher, SlurmLauncher, node_rank_from_env
from tests.fixtures import PLUGINS_OFF, tiny_case, wait_gone


#: CPU ranks are bounded by the CPUs: the 4-rank case runs where there are 4.
RANKS = [4, 2, 1] if (os.cpu_count() or 1) >= 4 else [2, 1]


def one_two_and_four_ranks(shared_run):
    """One session of the tiny case on 4 (where there are 4 CPUs), 2 and 1 rank(s), asked for in that order (3 jobs,
    not the 6 that a session per rank count would take: each multi-rank case alone would measure a 1-rank
    reference too)."""
    return shared_run(f"distributed: tiny on {RANKS} rank(s)", "--dlperf-model", "tiny", "--dlperf-gpus",
                      ",".join(map(str, RANKS)), "--dlperf-json", "results.json", "-v")


@pytest.mark.parametrize("ranks", [2, pytest.param(4, marks=pytest.mark.skipif(
    4 not in RANKS, reason="CPU ranks are bounded by the CPUs: 4 ranks need 4"))])
def test_global_throughput_is_the_ranks_together(shared_run, ranks):
    session = one_two_and_four_ranks(shared_run)
    session.result.assert_outcomes(passed=len(RANKS))
    results = session.tester.results()
    jsonio.validate(results, "results")
    record = next(c for c in results["cases"] if c["case"]["gpus"] == ranks)
    run = record["attempts"][0]["runs"][0]
    assert [r["rank"] for r in run["ranks"]] == list(range(ranks))
    for index, window in enumerate(run["windows"]):
        per_rank = [r["windows"][index] for r in run["ranks"]]
        assert window["samples"] == ranks * 32 * 5 == sum(w["samples"] for w in per_rank)
        assert window["seconds"] == max(w["seconds"] for w in per_rank)
        # Each rank's own rate counts its own (shorter or equal) seconds: their sum bounds the global rate from
        # above. DDP keeps the ranks in step: each step ends in an all-reduce that waits for every rank, so no
        # rank's window is a whole step (of the window's 5) longer than another's. A relative bound tighter than
        # that measures the host's scheduler, not the worker: under a loaded 2-core host a rank read its clock
        # 4.5 ms (3.4% of a 0.13 s window) after the other.
        total = sum(w["throughput"] for w in per_rank)
        assert total >= window["throughput"] * (1 - 1e-9)
        steps = window["samples"] // (ranks * 32)
        seconds = [w["seconds"] for w in per_rank]
        assert max(seconds) - min(seconds) < max(seconds) / steps, (index, seconds)
    assert [r["rank"] for r in record["ranks"]] == list(range(ranks))


def test_scaling_efficiency_is_reported_against_this_sessions_one_rank_case(shared_run):
    session = one_two_and_four_ranks(shared_run)
    session.result.assert_outcomes(passed=len(RANKS))
    # 1-rank cases run first, whatever the order they were asked for in.
    many_ranks = sorted(RANKS)[1:]
    session.result.stdout.fnmatch_lines(["*tiny-fp32-bs32-gpu1*", *(f"*tiny-fp32-bs32-gpu{n}*" for n in many_ranks),
                                         "gpus | fp32 bs32*| fp32 bs32 speedup",
                                         "   1 | * | 1.00x",
                                         *(f"   {n} | * | *x (*%)*" for n in many_ranks)])
    one, *more = session.tester.results()["cases"]
    assert [one["case"]["gpus"]] + [c["case"]["gpus"] for c in more] == sorted(RANKS)
    for many in more:
        scaling = many["scaling"]
        assert scaling["reference"] == one["throughput"] and scaling["reference_source"] == "this session"
        assert scaling["reference_kind"] == "plain process"  # the local launcher's 1-rank case: no DDP
        assert scaling["speedup"] == pytest.approx(many["throughput"] / one["throughput"])
        assert scaling["efficiency"] == pytest.approx(scaling["speedup"] / many["case"]["gpus"])
        assert scaling["minimum"] is None


def a_dying_rank_then_tiny_gated(shared_run):
    """One session of rank-exit on 2 ranks, which fails, and then tiny on 2 ranks, judged against a baseline whose
    defaults ask a scaling efficiency of 80%: the session goes on after the dead rank, and the scaling gate passes.

    Two tests read it: a session of their own each ran one 2-rank job (a torchrun agent and two ranks) more.  Only
    the 2-rank cases run (-m gpu2 leaves out the baseline's 1-rank entry): tiny's 1-rank reference is that entry.
    """
    def setup(dlperf):
        dlperf.pytester.makeconftest(RANK_FAULTS)
        dlperf.baseline([tiny_case(1.0), tiny_case(1.0, gpus=2)], name="low.json",
                        defaults={"min_scaling_efficiency": 0.8})

    return shared_run("distributed: rank-exit, then tiny gated, on 2 ranks", "-m", "gpu2", "--dlperf-baseline",
                      "low.json", "--dlperf-model", "rank-exit,tiny", "--dlperf-gpus", "2", "--dlperf-json",
                      "results.json", setup=setup)


def test_scaling_efficiency_is_gated_both_ways(dlperf, shared_run):
    # Only the 2-rank cases run (-m gpu2): tiny's reference is the baseline's 1-rank entry.
    session = a_dying_rank_then_tiny_gated(shared_run)
    session.result.assert_outcomes(failed=1, passed=1)  # rank-exit's failure: test_a_rank_that_dies_...
    record = next(c for c in session.tester.results()["cases"] if c["id"] == "tiny-fp32-bs32-gpu2")
    assert record["verdict"] != "error" and record["scaling"]["minimum"] == 0.8
    assert record["scaling"]["reference_source"] == "baseline"
    assert record["scaling"]["reference_kind"] is None  # as the baseline's source measured it

    fast = dlperf.baseline([tiny_case(1e9), tiny_case(1.0, gpus=2, min_scaling_efficiency=0.8)], name="high.json")
    result = dlperf.run("-m", "gpu2", "--dlperf-baseline", fast, "--dlperf-max-runs", "1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "   2 | * + | 0.00x (0%) FAIL*",
        "  FAIL tiny-fp32-bs32-gpu2: scaling efficiency 0% (speedup 0.00x on 2 ranks over 1000000000.0 img/s on 1, "
        "from baseline) is below the minimum 80%",
        "      IMPROVED tiny-fp32-bs32-gpu2: * img/s, *% above 1.0 (tolerance 5%, 98% CI *)"])


RANK_FAULTS = textwrap.dedent("""
    import os, sys, time
    from pytest_dlperf import register_model

    HERE = os.path.dirname(__file__)

    def rank_fault(kind):
        # torch is imported where a rank builds the model: the SIGTERM test's pytest, a process of its own,
        # imports this conftest and no torch otherwise (3.7 s of CPU).
        from torch import nn

        class RankFault(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3 * 4 * 4, 2)
                with open(os.path.join(HERE, f"pid-{os.environ['RANK']}"), "w") as f:
                    f.write(str(os.getpid()))

            def forward(self, x):
                if os.environ["RANK"] == "1":
                    if kind == "exit":
                        print("rank 1 about to die", file=sys.stderr, flush=True)
                        os._exit(7)
                    if kind == "hang":
                        print("rank 1 going to sleep", file=sys.stderr, flush=True)
                        time.sleep(600)
                return self.fc(x.flatten(1))

        return RankFault()

    for kind in ("exit", "hang"):
        register_model(f"rank-{kind}", task="image-classification", batch_size=8,
                       defaults={"image_size": 4, "num_classes": 2},
                       factory=lambda settings, kind=kind: rank_fault(kind))
""")


def rank_pids(path, ranks=2):
    deadline = time.monotonic() + 60
    files = [path / f"pid-{r}" for r in range(ranks)]
    while not all(f.exists() and f.read_text() for f in files):
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.1)
    return [int(f.read_text()) for f in files]


def test_a_rank_that_dies_fails_the_case_naming_it(shared_run):
    # The session goes on to tiny on 2 ranks, whose 1-rank scaling reference is the baseline's
    # (-m gpu2 leaves out the baseline's own 1-rank case): no 1-rank reference run is measured.
    session = a_dying_rank_then_tiny_gated(shared_run)
    result = session.result
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        "rank-exit-fp32-bs8-gpu2: rank 1 (exit status 7) died; the job ended with exit status 1",
        "--- last lines of the worker's stderr (*/ranks/*/attempt_0/1/stderr.log) ---",
        "rank 1 about to die",
    ])
    assert wait_gone(rank_pids(session.tester.path), 2.0) == []
    assert session.seconds < 90


def test_a_hung_collective_is_killed_on_every_rank(dlperf):
    dlperf.pytester.makeconftest(RANK_FAULTS)
    # 12 s: both ranks, forked from the fork server (a fraction of a second each), meet and reach the hung step
    # well within it, also beside another test worker (15 s was too short once on a loaded 2-core machine when
    # each rank was a fresh interpreter importing torch: rank 1 had not reached its step).
    result = dlperf.run("--dlperf-model", "rank-hang", "--dlperf-gpus", "2", "-o", "dlperf_timeout=12")
    result.assert_outcomes(failed=1)
    # The ranks that had not finished are named, with the hanging rank's own stderr; the limit is credited
    # to dlperf_timeout because it was given.
    result.stdout.fnmatch_lines(
        ["rank-hang-fp32-bs8-gpu2: timed out after 12 s (dlperf_timeout); the worker's process group was killed; "
         "rank(s) *1 had not finished",
         "*--- last lines of rank 1's stderr (*/1/stderr.log) ---", "rank 1 going to sleep"])
    assert wait_gone(rank_pids(dlperf.path), 2.0) == []


def test_sigterm_to_pytest_ends_every_rank(dlperf):
    dlperf.pytester.makeconftest(RANK_FAULTS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGINS_OFF,
         "--dlperf-device", "cpu", "--dlperf-model", "rank-hang", "--dlperf-gpus", "2", "--dlperf-warmup-steps", "1"],
        cwd=dlperf.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = rank_pids(dlperf.path)
    time.sleep(1.0)  # both ranks inside the hung step
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert wait_gone(pids, 5.0) == []
    agents = subprocess.run(["pgrep", "-f", f"torch.distributed.run.*{dlperf.path.name}"], capture_output=True)
    assert agents.stdout == b""


# --------------------------------------------------------------------------- pieces


def test_ranks_from_each_launchers_variables():
    assert ranks_from_env({}) == Ranks(0, 1, 0)
    assert ranks_from_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}) == Ranks(3, 8, 1)
    assert ranks_from_env({"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"}) == Ranks(9, 16, 1)
    assert ranks_from_env({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                           "OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == Ranks(1, 2, 1)


def test_global_windows_take_the_slowest_rank():
    ranks = [[{"steps": 10, "samples": 320, "seconds": 1.0, "throughput": 320.0}],
             [{"steps": 10, "samples": 320, "seconds": 2.0, "throughput": 160.0}]]
    assert global_windows(ranks, 2) == [{"steps": 10, "samples": 640, "seconds": 2.0, "throughput": 320.0}]


def test_the_local_launcher_reaches_the_visible_gpus(tmp_path):
    launcher = LocalLauncher()
    # CPU ranks: one per CPU of this node at most (--dlperf-gpus 99999 is skipped, not 99999 processes).
    assert launcher.reach("cuda", 1) == 1 and launcher.reach("cpu", 0) == (os.cpu_count() or 1)
    one = launcher.plan(1, "cuda", tmp_path)
    assert one.command[1:] == ["-m", "pytest_dlperf.worker"] and not one.distributed
    many = launcher.plan(8, "cuda", tmp_path)
    assert "--nproc-per-node=8" in many.command and "--standalone" in many.command and many.distributed
    assert LocalLauncher(force_distributed=True).plan(1, "cuda", tmp_path).distributed


def test_the_agents_root_cause_is_read():
    text = """
    Root Cause (first observed failure):
    [0]:
      time      : 2026-11-21_20:30:00
      host      : vm
      rank      : 1 (local_rank: 1)
      exitcode  : 7 (pid: 1234)
    """
    assert LocalLauncher().failed_rank(text) == (1, 7)
    assert LocalLauncher().failed_rank("nothing here") is None


def test_srun_and_mpirun_reports_are_read():
    assert SlurmLauncher().failed_rank("srun: error: vm: task 1: Exited with exit code 7\n") == (1, 7)
    assert SlurmLauncher().failed_rank("srun: error: vm: task 3: Killed\n") == (3, None)
    text = """mpirun detected that one or more processes exited with non-zero status, thus causing
    the job to be terminated. The first process to do so was:

      Process name: [[57219,1],1]
      Exit code:    7
    """
    assert MpiLauncher().failed_rank(text) == (1, 7)


def test_node_rank_comes_from_the_environment():
    assert node_rank_from_env({}) == 0
    assert node_rank_from_env({"SLURM_NODEID": "3"}) == 3
    assert node_rank_from_env({"OMPI_COMM_WORLD_RANK": "1", "DLPERF_NODE_RANK": "2"}) == 2


def test_skip_when_the_launcher_cannot_reach_enough_gpus(dlperf, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    result = dlperf.pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:cacheprovider",
                                       "--dlperf-device", "cuda", "--dlperf-model", "tiny", "--dlperf-gpus", "8",
                                       "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*tiny-fp32-bs32-gpu8*: needs 8 GPUs, 1 visible"])


def test_the_rank_that_died_is_blamed_not_the_one_that_lost_its_peer():
    from pytest_dlperf.launch.workers import first_failed_rank
    from pytest_dlperf.protocol import WorkerResult, WorkerStatus

    def result(status, **fields):
        return WorkerResult(case={}, rank=0, world_size=2, device={}, status=WorkerStatus(status), **fields)

    lost_peer = result("error", error={"message": "[gloo] Read error: Connection reset by peer"})
    ok = result("ok")
    assert first_failed_rank(2, {0: lost_peer}, (0, 1)) == 1  # rank 1 wrote nothing: it died
    assert first_failed_rank(2, {0: lost_peer, 1: result("error", error={"message": "boom"})}, None) == 1
    assert first_failed_rank(2, {0: lost_peer, 1: ok}, None) == 0
    assert first_failed_rank(4, {0: ok, 1: ok}, (3, 9)) == 3
    assert first_failed_rank(1, {}, None) is None


def test_a_multi_rank_case_alone_measures_its_one_rank_reference(dlperf):
    # The acceptance: -m gpu2 alone, no baseline, still reports speedup and efficiency.
    result = dlperf.run("-m", "gpu2", "--dlperf-model", "tiny", "--dlperf-gpus", "1,2",
                        "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["   2 | * | *x (*%)*", "*scaling efficiency *% (speedup *x on 2 ranks over * img/s "
                                                      "on 1 (plain process), from measured for scaling)*"])
    (record,) = dlperf.results()["cases"]
    assert record["scaling"]["reference_source"] == "measured for scaling"
    assert record["scaling"]["reference_kind"] == "plain process"
    assert record["scaling"]["efficiency"] == pytest.approx(record["scaling"]["speedup"] / 2)
