"""The intra-op threads of a CPU case's ranks (issue 26): one by default, ``dlperf_cpu_threads = N|cores``, the
environment's ``OMP_NUM_THREADS``, and the count a baseline entry records (``cpu_threads``) or, saved before it
was recorded, stood for.  Each session reads the count each worker reports (``device.intra_op_threads``:
``torch.get_num_threads()`` in the worker) beside the one the case's parameters asked for.  The fork server's
side (a forked worker and a fresh one, one thread each; another count, a server of its own) is in
tests/test_fork_server.py.
"""

from __future__ import annotations

import json
import os

import pytest

from pytest_dlperf.launch import threads
from pytest_dlperf.launch.launchers import get_launcher
from tests.fixtures import tiny_case

CORES = os.cpu_count() or 1
#: One run a case, decided or not: the sessions read thread counts, not verdicts.
ONE_RUN = ("--dlperf-max-runs", "1", "--dlperf-json", "results.json")


def threads_by_case(dlperf) -> dict[str, tuple[int | None, list[int | None]]]:
    """Each case of the session's results: (the count its parameters asked for, what each run's worker had)."""
    return {case["id"]: (case["parameters"].get("cpu_threads"),
                         [run["device"].get("intra_op_threads") for attempt in case["attempts"]
                          for run in attempt["runs"]])
            for case in dlperf.results()["cases"]}


def test_the_rules_in_order():
    assert threads.parse("--x", None) is None
    assert threads.parse("--x", "Cores") == threads.CORES and threads.parse("--x", "3") == 3
    # The option, else the entry's count, else the environment's, else one.
    assert threads.choose(3, 2, 1, {"OMP_NUM_THREADS": "4"}) == threads.Chosen(3, "option", 2)
    assert threads.choose(threads.CORES, None, 1, {}).threads == threads.cores(1) == CORES
    assert threads.choose(None, 2, 1, {"OMP_NUM_THREADS": "4"}) == threads.Chosen(2, "baseline", 2)
    assert threads.choose(None, None, 1, {"OMP_NUM_THREADS": "4,2"}) == threads.Chosen(4, "environment")
    assert threads.choose(None, None, 1, {"OMP_NUM_THREADS": "many"}) == threads.Chosen(1, "default")
    # An entry saved before the count was recorded: the environment's where set, else the CPUs per rank.
    assert threads.as_before(2, {"OMP_NUM_THREADS": "3"}) == 3
    assert threads.as_before(2, {}) == max(1, CORES // 2)
    assert threads.mismatch("c", 2, threads.Chosen(2, "option", 2), recorded=True) is None


def test_every_launcher_passes_the_count_on_and_says_how_many_ranks_share_a_node(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    assert [get_launcher("local").ranks_per_node(4), get_launcher("mpi").ranks_per_node(4),
            get_launcher("torchrun", nnodes=2, endpoint="h:1").ranks_per_node(4),
            get_launcher("slurm").ranks_per_node(3)] == [4, 4, 2, 2]
    for name in ("local", "torchrun", "mpi"):  # srun's plan asks scontrol for its first node
        launcher = get_launcher(name)
        for ranks in (1, 2):
            plan = launcher.with_env(launcher.plan(ranks, "cpu", tmp_path), threads.environment(3))
            assert plan.env["OMP_NUM_THREADS"] == "3", (name, ranks)
    mpirun = get_launcher("mpi")
    plan = mpirun.with_env(mpirun.plan(2, "cpu", tmp_path), threads.environment(3))
    exported = plan.command.index("OMP_NUM_THREADS")
    assert plan.command.count("OMP_NUM_THREADS") == 1 and plan.command[exported - 1] == "-x"


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_count_is_one_line_before_any_case_runs(dlperf, value):
    result = dlperf.run("--dlperf-model", "tiny", "-o", f"dlperf_cpu_threads={value}", "--dlperf-log-dir", "logs")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: dlperf_cpu_threads: '{value}' is not allowed; expected a positive "
                                 "integer (intra-op threads per CPU rank) or cores"])
    assert not (dlperf.path / "logs").exists()


def test_a_saved_baseline_records_the_count_and_a_later_gate_runs_with_it(dlperf, monkeypatch):
    # Saved where the environment gives 2 threads: the worker had 2, and the entry says so.
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "1", "--dlperf-save-baseline", "saved.json",
               *ONE_RUN).assert_outcomes(passed=1)
    assert threads_by_case(dlperf) == {"tiny-fp32-bs32-gpu1": (2, [2])}
    saved = json.loads((dlperf.path / "saved.json").read_text())
    assert saved["schema_version"] == 2 and [c.get("cpu_threads") for c in saved["cases"]] == [2]
    # Gated without the variable (where a case without an entry gets one thread): the saved entry runs with its
    # 2, an entry saved before the count was recorded with this node's CPUs, as it ran then; the forked workers
    # had as many.  A wide tolerance: the verdicts are not the point.
    monkeypatch.delenv("OMP_NUM_THREADS")
    saved["defaults"]["tolerance"] = 0.9
    saved["cases"].append(tiny_case(saved["cases"][0]["throughput"], batch_size=16))
    (dlperf.path / "saved.json").write_text(json.dumps(saved))
    dlperf.run("--dlperf-baseline", "saved.json", *ONE_RUN).assert_outcomes(passed=2)
    assert threads_by_case(dlperf) == {"tiny-fp32-bs32-gpu1": (2, [2]), "tiny-fp32-bs16-gpu1": (CORES, [CORES])}
    assert "cpu_threads" not in dlperf.results()["options"]


def test_a_count_other_than_the_entrys_fails_the_case_in_one_line(dlperf, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    path = dlperf.baseline([tiny_case(1000.0, cpu_threads=CORES + 1)], schema_version=2)
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-model", "tiny", "--dlperf-batch-size", "8",
                        "-o", "dlperf_cpu_threads=cores", *ONE_RUN)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        f"*tiny-fp32-bs32-gpu1: dlperf_cpu_threads cores runs {CORES} intra-op thread(s) per CPU rank, but its "
        f"baseline entry was measured with cpu_threads {CORES + 1}: a figure of another method; gate it with "
        f"{CORES + 1} (or without "
        "dlperf_cpu_threads), or save the baseline again with dlperf_cpu_threads cores"])
    # No run of the refused case; the case without an entry ran with this node's CPUs, and the results say
    # what was asked.
    assert threads_by_case(dlperf) == {"tiny-fp32-bs32-gpu1": (CORES, []), "tiny-fp32-bs8-gpu1": (CORES, [CORES])}
    assert dlperf.results()["options"]["cpu_threads"] == "cores"
