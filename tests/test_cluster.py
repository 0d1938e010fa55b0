"""The localhost SLURM cluster and mpirun fixtures of tests/cluster.py, run for real.

Each test skips (with the missing binary named) where SLURM, munge or OpenMPI is not
installed; ``.ci/install-cluster`` installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import cluster as cluster_mod
from tests.cluster import SLURM_BINARIES, Mpirun, SlurmCluster, clean_env, free_port

# The fixtures slurm_cluster and mpirun. conftest.py may list the same plugin: pytest loads it once.
pytest_plugins = ("tests.cluster",)

# A two-rank gloo all_reduce; the launcher's variables give the rank and world size.
GLOO_WORKER = textwrap.dedent("""
    import datetime, os
    env = os.environ
    rank = env.get("SLURM_PROCID", env.get("OMPI_COMM_WORLD_RANK"))
    world = env.get("SLURM_NTASKS", env.get("OMPI_COMM_WORLD_SIZE"))
    env["RANK"], env["WORLD_SIZE"] = rank, world
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    # One write per line: with PYTHONUNBUFFERED, print() writes its pieces one by one, and
    # the launcher may interleave the two ranks' pieces.
    os.write(1, f"rank={dist.get_rank()} world={dist.get_world_size()} sum={t.item():g}\\n".encode())
    dist.destroy_process_group()
""")


def labelled(output: str) -> dict[int, dict[str, str]]:
    """``srun --label env`` output -> {task id: {variable: value}}."""
    tasks: dict[int, dict[str, str]] = {}
    for line in output.splitlines():
        m = re.match(r"\s*(\d+): ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if m:
            tasks.setdefault(int(m.group(1)), {})[m.group(2)] = m.group(3)
    return tasks


@pytest.fixture
def gloo_worker(tmp_path: Path) -> Path:
    path = tmp_path / "gloo_worker.py"
    path.write_text(GLOO_WORKER)
    return path


def check_gloo(output: str) -> None:
    # findall, not splitlines: mpirun forwards each rank's output in chunks, and two ranks'
    # lines can arrive glued together ("rank=1 ... sum=3rank=0 ... sum=3\n\n").
    found = sorted(re.findall(r"rank=(\d+) world=(\d+) sum=(\S+)", output))
    assert found == [("0", "2", "3"), ("1", "2", "3")], output


# ------------------------------------------------------------------------------ SLURM


def test_cluster_is_private_and_idle(slurm_cluster: SlurmCluster):
    conf = slurm_cluster.conf_path.read_text()
    assert slurm_cluster.env["SLURM_CONF"] == str(slurm_cluster.conf_path)
    assert f"NodeName={slurm_cluster.nodename} " in conf
    assert f"SlurmctldPort={slurm_cluster.ports[0]}" in conf
    assert "ProctrackType=proctrack/linuxproc" in conf and "TaskPlugin=task/none" in conf
    assert slurm_cluster.node_state() == "idle", slurm_cluster.logs()
    r = slurm_cluster.run(["sinfo", "-h", "-o", "%P %D %t %c"])
    assert r.stdout.split() == ["debug*", "1", "idle", str(slurm_cluster.cpus)]
    # No job variables of an enclosing job leak into the cluster's environment.
    assert not [k for k in slurm_cluster.env if k.startswith("SLURM_") and k != "SLURM_CONF"]


def test_srun_two_tasks(slurm_cluster: SlurmCluster):
    r = slurm_cluster.run(["srun", "-N1", "-n2", "--label", "env"], timeout=30)
    tasks = labelled(r.stdout)
    assert sorted(tasks) == [0, 1], r.stdout
    for task, env in tasks.items():
        assert env["SLURM_PROCID"] == str(task)
        assert env["SLURM_LOCALID"] == str(task)
        assert env["SLURM_NTASKS"] == "2"
        assert env["SLURM_JOB_NODELIST"] == slurm_cluster.nodename
        assert env["SLURM_CONF"] == str(slurm_cluster.conf_path)
    assert tasks[0]["SLURM_JOB_ID"] == tasks[1]["SLURM_JOB_ID"]


def test_salloc_then_srun_step(slurm_cluster: SlurmCluster):
    # The way `salloc -N1 -n2 pytest ...` is used: an allocation, then steps inside it.
    r = slurm_cluster.run(["salloc", "-N1", "-n2", "srun", "--label", "env"], timeout=30)
    assert re.search(r"Granted job allocation (\d+)", r.stderr), r.stderr
    job_id = re.search(r"Granted job allocation (\d+)", r.stderr).group(1)
    tasks = labelled(r.stdout)
    assert sorted(tasks) == [0, 1], r.stdout
    for task, env in tasks.items():
        assert env["SLURM_JOB_ID"] == job_id
        assert env["SLURM_PROCID"] == str(task)
        assert env["SLURM_NTASKS"] == "2"
        assert env["SLURM_STEP_ID"] == "0"


def test_srun_failure_is_reported(slurm_cluster: SlurmCluster):
    r = slurm_cluster.run(["srun", "-N1", "-n2", "sh", "-c", 'exit $((SLURM_PROCID + 3))'], check=False, timeout=30)
    assert r.returncode != 0
    with pytest.raises(AssertionError, match="exited with"):
        slurm_cluster.run(["srun", "-n1", "false"], timeout=30)


def test_gloo_allreduce_under_srun(slurm_cluster: SlurmCluster, gloo_worker: Path):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "GLOO_SOCKET_IFNAME": "lo"}
    r = slurm_cluster.run(["srun", "-N1", "-n2", "--kill-on-bad-exit=1", sys.executable, str(gloo_worker)],
                          env=env, timeout=60)
    check_gloo(r.stdout)


def test_second_cluster_beside_a_running_one(slurm_cluster: SlurmCluster):
    """A second private cluster (as a system slurm would be) does not disturb the first, and
    stopping it leaves no daemon behind."""
    root = cluster_mod._short_tmpdir("slurm2-")
    other = SlurmCluster(root)
    assert set(other.ports).isdisjoint(slurm_cluster.ports)
    try:
        other.start()
        a = other.run(["srun", "-n1", "printenv", "SLURM_CONF"], timeout=30)
        b = slurm_cluster.run(["srun", "-n1", "printenv", "SLURM_CONF"], timeout=30)
        assert a.stdout.strip() == str(other.conf_path)
        assert b.stdout.strip() == str(slurm_cluster.conf_path)
        config = other.run(["scontrol", "show", "config"]).stdout
        assert re.search(rf"^SlurmctldPort\s*=\s*{other.ctld_port}$", config, re.M), config
        assert other.cluster_name != slurm_cluster.cluster_name
        # A job still running at teardown is cancelled, and its srun, slurmstepd and task end.
        running = subprocess.Popen(["srun", "-n1", "sleep", "300"], env=other.env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        other._wait(lambda: other.node_state() in ("alloc", "mix"), "the sleep job to start")
        other.stop()  # asserts that nothing it started is left
        # srun ends (its exit status when the controller stops under it is SLURM's choice:
        # seen both 0 and non-zero here); wait() raises if it is still running.
        running.wait(timeout=5)
        assert [d.name for d in other._daemons] == ["munged", "slurmctld", "slurmd"]
        assert not any(cluster_mod._pid_alive(d.pid) for d in other._daemons)
        assert not cluster_mod._procs_mentioning(str(root))
        assert slurm_cluster.node_state() == "idle"
    finally:
        other.stop(check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_skip_reason_names_missing_binary(monkeypatch):
    monkeypatch.setattr(cluster_mod, "_SBIN", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cluster_mod._missing(SLURM_BINARIES) == list(SLURM_BINARIES)
    assert cluster_mod.which("mpirun") is None


def test_clean_env_drops_enclosing_job():
    env = clean_env({"PATH": "/bin", "SLURM_JOB_ID": "7", "SLURM_PROCID": "1", "OMPI_COMM_WORLD_RANK": "0",
                     "PMIX_RANK": "0", "HOME": "/root"}, SLURM_CONF="/x/slurm.conf")
    assert env["SLURM_CONF"] == "/x/slurm.conf" and env["HOME"] == "/root"
    assert not {"SLURM_JOB_ID", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"} & set(env)
    assert set(cluster_mod._SBIN) <= set(env["PATH"].split(os.pathsep))  # the daemons live in sbin


# ------------------------------------------------------------------------------ OpenMPI


def test_mpirun_argv_and_env(mpirun: Mpirun):
    argv = mpirun.argv(3)
    assert argv[0].endswith("mpirun")
    assert "--allow-run-as-root" in argv and "--oversubscribe" in argv
    assert argv[argv.index("-np") + 1] == "3"
    assert mpirun.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert mpirun.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_mpirun_two_ranks(mpirun: Mpirun):
    code = ("import os; e = os.environ; os.write(1, ('< %s %s %s >\\n' % (e['OMPI_COMM_WORLD_RANK'], "
            "e['OMPI_COMM_WORLD_SIZE'], e['OMPI_COMM_WORLD_LOCAL_RANK'])).encode())")
    r = mpirun.run([sys.executable, "-c", code], np=2, timeout=30)
    assert sorted(re.findall(r"< (\d+) (\d+) (\d+) >", r.stdout)) == [("0", "2", "0"), ("1", "2", "1")], \
        r.stdout + r.stderr


def test_gloo_allreduce_under_mpirun(mpirun: Mpirun, gloo_worker: Path):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "GLOO_SOCKET_IFNAME": "lo"}
    r = mpirun.run([sys.executable, str(gloo_worker)], np=2, env=env, timeout=60)
    check_gloo(r.stdout)


def test_start_failure_shows_logs_and_cleans_up():
    """A daemon that dies at start fails fast with its log, and nothing it started is left."""
    missing = cluster_mod._missing(SLURM_BINARIES)
    if missing or os.geteuid() != 0:
        pytest.skip(f"SLURM not installed: {', '.join(missing)} not found" if missing else "not root")

    class Broken(SlurmCluster):
        def slurm_conf(self) -> str:
            return super().slurm_conf() + "NoSuchOption=1\n"

    root = cluster_mod._short_tmpdir("slurm-bad-")
    broken = Broken(root, start_timeout=15)
    try:
        with pytest.raises(cluster_mod.SlurmStartError, match=r"(?s)slurmctld exited.*NoSuchOption"):
            broken.start()
        assert not any(d.running() for d in broken._daemons)
        assert not cluster_mod._procs_mentioning(str(root))
        # Whatever still carries the cluster's SLURM_CONF at teardown is killed and reported.
        stray = subprocess.Popen(["sleep", "300"], env=broken.env)
        with pytest.raises(AssertionError, match=rf"left processes behind[\s\S]*pid {stray.pid}: sleep 300"):
            broken.stop()
        assert stray.wait(timeout=5) == -9
    finally:
        broken.stop(check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_mpirun_timeout_kills_the_ranks(mpirun: Mpirun):
    with pytest.raises(AssertionError, match="timed out after 1.5 s"):
        mpirun.run(["sleep", "317"], np=2, timeout=1.5)
    assert not cluster_mod._procs_mentioning("sleep 317")


def test_srun_timeout_ends_the_step(slurm_cluster: SlurmCluster):
    with pytest.raises(AssertionError, match=r"(?s)timed out after 1.5 s.*slurmctld"):
        slurm_cluster.run(["srun", "-n2", "sleep", "318"], timeout=1.5)
    # srun's SIGTERM cancels the step: its tasks end, and the node is free again.
    slurm_cluster._wait(lambda: not cluster_mod._procs_mentioning("sleep 318") and slurm_cluster.node_state() == "idle",
                        "the timed-out step to end")
