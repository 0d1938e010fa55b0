"""The slurm, mpi and torchrun launchers on real SLURM, OpenMPI and torchrun, on localhost.

The SLURM cluster and mpirun come from ``tests/cluster.py`` (started per session; the tests
skip, saying what is missing, where ``.ci/install-cluster`` could not install them).
"""

import json
import shlex
import subprocess
import sys
import time

import pytest

from tests.fixtures import FAST, tiny_case
from pytest_dlperf import jsonio
from tests.cluster import free_port

# The inner sessions run as subprocesses: under salloc, mpirun or as two "nodes".
INNER = [sys.executable, "-m", "pytest", *FAST, "--dlperf-model", "tiny"]


def read_results(path):
    data = json.loads(path.read_text())
    jsonio.validate(data, "results")
    return {c["id"]: c for c in data["cases"]}


def assert_scaled_two_ranks(cases):
    one, two = cases["tiny-fp32-bs32-gpu1"], cases["tiny-fp32-bs32-gpu2"]
    assert one["verdict"] == two["verdict"] == "no-baseline"
    assert [r["rank"] for r in two["ranks"]] == [0, 1]
    scaling = two["scaling"]
    assert scaling["reference"] == one["throughput"] and scaling["reference_source"] == "this session"
    # srun and mpirun start the 1-rank case as one process of a one-task job: no process group, no DDP.
    assert one["ranks"] == [] and scaling["reference_kind"] == "plain process"
    assert scaling["speedup"] == pytest.approx(two["throughput"] / one["throughput"])
    assert scaling["efficiency"] == pytest.approx(scaling["speedup"] / 2)


def test_slurm_launcher_inside_an_allocation(slurm_cluster, pytester):
    result = slurm_cluster.run(
        ["salloc", "-N1", "-n2", *INNER, "--dlperf-gpus", "1,2", "--dlperf-launcher", "slurm",
         "--dlperf-json", "results.json"],
        cwd=pytester.path, timeout=240)
    assert "2 passed" in result.stdout, result.stdout
    assert "speedup" in result.stdout
    cases = read_results(pytester.path / "results.json")
    assert_scaled_two_ranks(cases)
    run_dir = cases["tiny-fp32-bs32-gpu2"]["attempts"][0]["runs"][0]["log_dir"]
    assert sorted(p.name for p in pytester.path.joinpath(run_dir).glob("rank*.stderr.log")) == [
        "rank0.stderr.log", "rank1.stderr.log"]


def test_slurm_launcher_skips_outside_an_allocation(slurm_cluster, pytester):
    result = slurm_cluster.run([*INNER, "--dlperf-launcher", "slurm", "-rs"], cwd=pytester.path, check=False)
    assert result.returncode == 0, result.stdout
    assert "the slurm launcher runs inside an allocation: start pytest under salloc" in result.stdout


def test_slurm_launcher_skips_cases_larger_than_the_allocation(slurm_cluster, pytester):
    result = slurm_cluster.run(["salloc", "-N1", "-n2", *INNER, "--dlperf-gpus", "4", "--dlperf-launcher", "slurm",
                                "-rs"], cwd=pytester.path, timeout=120, check=False)
    assert "needs 4 ranks, the slurm launcher reaches 2" in result.stdout, result.stdout


def test_a_failing_rank_under_srun_is_named(slurm_cluster, pytester):
    # torch imported where a rank builds the model: the session's pytest imports no torch otherwise (3.7 s of CPU).
    pytester.makeconftest("""
        import os
        from pytest_dlperf import register_model

        @register_model("dies-on-rank1", task="image-classification", batch_size=8,
                        defaults={"image_size": 4, "num_classes": 2})
        def dies(settings):
            from torch import nn

            if os.environ.get("SLURM_PROCID") == "1":
                raise SystemExit(5)
            return nn.Sequential(nn.Flatten(), nn.Linear(48, 2))
    """)
    # INNER's tiny case (and the 1-rank reference its 2-rank case would measure) left out: the dying case alone.
    result = slurm_cluster.run(["salloc", "-N1", "-n2", *INNER, "--dlperf-model", "dies-on-rank1",
                                "--dlperf-gpus", "2", "--dlperf-launcher", "slurm", "-k", "dies-on-rank1"],
                               cwd=pytester.path, timeout=180, check=False)
    assert result.returncode == 1, result.stdout
    assert "dies-on-rank1-fp32-bs8-gpu2: rank 1 (exit status 5) died" in result.stdout, result.stdout


def test_mpi_launcher(mpirun, pytester):
    argv = mpirun.argv(2)[1:]  # the fixture's site arguments, without "mpirun" and its -np
    np_at = argv.index("-np")
    site_args = shlex.join(argv[:np_at] + argv[np_at + 2:])
    result = subprocess.run([*INNER, "--dlperf-gpus", "1,2", "--dlperf-launcher", "mpi",
                             "--dlperf-launcher-args", site_args, "--dlperf-json", "results.json"],
                            cwd=pytester.path, env=mpirun.env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    cases = read_results(pytester.path / "results.json")
    assert_scaled_two_ranks(cases)


def test_torchrun_across_two_nodes(dlperf):
    """Two pytest processes on 127.0.0.1 acting as the two nodes of one job."""
    pytester = dlperf.pytester
    # The 1-rank scaling reference is a baseline entry's (-m gpu2 leaves its own case out), so
    # rank 0's node measures no 1-rank reference run before it reports.
    reference = dlperf.baseline([tiny_case(1.0)])
    endpoint = f"127.0.0.1:{free_port()}"
    common = [*INNER, "--dlperf-gpus", "2", "--dlperf-launcher", "torchrun", "--dlperf-nnodes", "2",
              "--dlperf-rdzv-endpoint", endpoint, "-v",  # re-measurement is off across nodes
              "--dlperf-baseline", reference, "-m", "gpu2"]
    nodes = []
    for rank in (0, 1):
        folder = pytester.mkdir(f"node{rank}")
        nodes.append(subprocess.Popen([*common, "-o", f"dlperf_node_rank={rank}", "--dlperf-json", "results.json"],
                                      cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [node.communicate(timeout=240)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    records = [read_results(pytester.path / f"node{r}" / "results.json")["tiny-fp32-bs32-gpu2"] for r in (0, 1)]
    reporting = [r for r in records if r["verdict"] != "remote"]
    assert len(reporting) == 1, records
    assert reporting[0]["scaling"]["reference_source"] == "baseline"
    assert [r["rank"] for r in reporting[0]["ranks"]] == [0, 1]
    assert len({r["host"] for r in reporting[0]["ranks"]}) == 1  # both "nodes" are this machine
    other = next(r for r in records if r["verdict"] == "remote")
    assert "ran on this node; the node of rank 0 reports" in other["message"]


def test_torchrun_rendezvous_that_times_out_says_so(dlperf):
    # In-process: the node needs no process of its own (no other node joins), and a pytest start is 1.3 s of CPU.
    endpoint = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-gpus", "2", "--dlperf-launcher", "torchrun",
                        "--dlperf-nnodes", "2", "--dlperf-rdzv-endpoint", endpoint, "-o", "dlperf_node_rank=0",
                        "-o", "dlperf_rdzv_timeout=4")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert (f"tiny-fp32-bs32-gpu2: the rendezvous at {endpoint} timed out after 4 s: this node (node rank 0) "
            "joined, not all 2 nodes did" in out), out
    assert time.monotonic() - started < 120
