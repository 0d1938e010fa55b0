"""The fork server (issue 32): each run is still a process of its own, only started sooner.

A probe model, registered from the inner session's conftest, records what its worker process sees when
the model is built: its pid and parent, its process group, its random state, its environment (Python's and
the one ``/proc/PID/environ`` shows), its memory cap, what an earlier run left in it; then it leaves traces
a later run must not see.  Its runs are compared with each other and with a worker started as a fresh
interpreter (``dlperf_start = fresh``).  Then the server's failures: killed while a run goes on, unable
to start; and an interrupted session that leaves no process behind.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from pytest_dlperf.launch import forkserver
from pytest_dlperf.launch.launchers import STEADY_MALLOC
from pytest_dlperf.worker import forkserver as server_side
from pytest_dlperf.worker import process_state
from tests.fixtures import PLUGINS_OFF, wait_gone

STEADY = ":".join(f"{name}={value}" for name, value in STEADY_MALLOC.items())

PROBE = textwrap.dedent('''
    import json, os, random, resource, signal, subprocess, sys, time
    from pytest_dlperf import register_model

    # numpy and torch are imported where a worker builds a model, not here: the interrupted session's pytest
    # imports this conftest in a process of its own, which imports no torch otherwise (3.7 s of CPU).
    HERE = os.path.dirname(__file__)


    def proc_environ():
        with open("/proc/self/environ", "rb") as handle:
            items = handle.read().decode().split("\\0")
        return dict(item.split("=", 1) for item in items if "=" in item)


    def cmdline(pid):
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode().split("\\0")


    def parent_of(pid):
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])


    @register_model("probe", task="image-classification", batch_size=4, defaults={"image_size": 8, "num_classes": 2})
    def probe(settings):
        import numpy, torch
        from torch import nn

        if getattr(torch, "probe_leak", None) == os.getpid():  # built again in the same run (to count its FLOPs)
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2))
        environ = proc_environ()
        seen = {
            "started": time.time(), "rank": os.environ.get("RANK"), "pid": os.getpid(), "ppid": os.getppid(),
            "grandparent": parent_of(os.getppid()), "grandparent_cmdline": cmdline(parent_of(os.getppid())),
            "pgid": os.getpgid(0), "sid": os.getsid(0),
            "parent": cmdline(os.getppid()),
            "torch_seed": torch.initial_seed(), "torch_draw": torch.rand(3).tolist(),
            "random": random.random(), "numpy": float(numpy.random.rand()),
            "run_id": os.environ.get("DLPERF_RUN_ID"), "proc_run_id": environ.get("DLPERF_RUN_ID"),
            "proc_tunables": environ.get("GLIBC_TUNABLES"), "tunables": os.environ.get("GLIBC_TUNABLES"),
            "home": os.environ.get("HOME"),
            "threads": torch.get_num_threads(), "proc_omp": environ.get("OMP_NUM_THREADS"),
            "leaked_env": os.environ.get("DLPERF_PROBE_LEAK"), "leaked_module": getattr(torch, "probe_leak", None),
            "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)[0],
            "cuda_initialized": torch.cuda.is_initialized(),
            "cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
        }
        # What a run leaves behind, which the next must not see: a variable, a module's attribute, the
        # random state moved on.
        os.environ["DLPERF_PROBE_LEAK"] = str(os.getpid())
        torch.probe_leak = os.getpid()
        torch.rand(1000)
        with open(os.path.join(HERE, f"probe-{os.getpid()}.json"), "w") as handle:
            json.dump(seen, handle)
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2))


    def fault(kind):
        """``killserver``: SIGKILL the fork server mid-run, then hang; ``hang``: hang with a grandchild."""
        from torch import nn

        class Fault(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3 * 4 * 4, 2)

            def forward(self, x):
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                with open(os.path.join(HERE, "pids"), "w") as handle:
                    handle.write(f"{os.getpid()} {child.pid} {os.getppid()}")
                if kind == "killserver":
                    if "pytest_dlperf.worker.forkserver" not in cmdline(os.getppid()):
                        raise RuntimeError("not forked by a fork server")
                    os.kill(os.getppid(), signal.SIGKILL)
                time.sleep(600)
                return self.fc(x.flatten(1))

        return Fault()


    for kind in ("killserver", "hang"):
        register_model(kind, task="image-classification", batch_size=4, defaults={"image_size": 4, "num_classes": 2},
                       factory=lambda settings, kind=kind: fault(kind))
''')


def probes(folder: Path) -> list[dict]:
    """What each run of the probe saw, in the order the runs started."""
    found = [json.loads(path.read_text()) for path in folder.glob("probe-*.json")]
    for path in folder.glob("probe-*.json"):
        path.unlink()
    return sorted(found, key=lambda seen: seen["started"])


@functools.cache
def preloaded_interpreter() -> subprocess.CompletedProcess:
    """A fresh interpreter that imports what a fork server imports before its first fork (``preload``), checks what
    the server checks then, and prints whether CUDA is initialized and torch's seed.

    Run once per test process, for two tests (the server's start, the seeds of fresh processes): each interpreter
    that imports torch costs 3.7 s of CPU."""
    script = ("from pytest_dlperf.worker import forkserver as f; f.preload(); f.check_clean(); import torch; "
              "print(torch.cuda.is_initialized(), torch.initial_seed())")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


#: :func:`torch_seeds_are_fixed`'s answer, once known: the torch of a test process does not change.
_SEEDS_FIXED: list[bool] = []


def torch_seeds_are_fixed(fresh_seed: int | None = None) -> bool:
    """Whether two fresh processes start torch's generator at one seed (older builds) or each at its own.

    The two: :func:`preloaded_interpreter` and a fresh worker (``fresh_seed``), where the test has one, else
    another interpreter.  Asked once per test process (each interpreter is a torch import, 3.7 s of CPU).
    """
    if not _SEEDS_FIXED:
        done = preloaded_interpreter()
        assert done.returncode == 0, done.stderr
        if fresh_seed is None:
            draw = [sys.executable, "-c", "import torch; print(torch.initial_seed())"]
            fresh_seed = int(subprocess.run(draw, capture_output=True, text=True, check=True).stdout)
        _SEEDS_FIXED.append(int(done.stdout.split()[1]) == fresh_seed)
    return _SEEDS_FIXED[0]


def run_probe(dlperf, *args: str) -> list[dict]:
    result = dlperf.run("--dlperf-model", "probe", *args)
    result.assert_outcomes(passed=1)
    return probes(dlperf.path)


@pytest.fixture
def probed(dlperf, monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the plugin's own count (tests.fixtures sets one)
    dlperf.pytester.makeconftest(PROBE)
    return dlperf


def test_each_run_is_a_process_of_its_own(probed):
    # First a batch size search, whose trials run under a memory cap, and the run it measures after them: no
    # run after a trial may inherit its cap.
    searched = run_probe(probed, "--dlperf-batch-size", "max", "--dlperf-max-memory", "2GiB",
                         "-o", "dlperf_max_batch_trials=2")
    capped = [seen for seen in searched if "max-batch" in seen["argv"][1]]
    # Its baseline entry was measured with fresh workers (the verdict names the crossing: tests/test_host_bound.py).
    entry = {"model": "probe", "precision": "fp32", "batch_size": 4, "throughput": 1.0, "tolerance": 0.99,
             "cpu_threads": 1, "start": "fresh"}
    runs = [seen for seen in searched if seen not in capped] + run_probe(
        probed, "--dlperf-runs", "3", "--dlperf-json", "forked.json", "--dlperf-log-dir", "logs",
        "--dlperf-baseline", probed.baseline([entry], schema_version=2))
    # The fresh worker's session as a non-interactive shell's background job runs it (`cmd &`, nohup): SIGINT and
    # SIGQUIT ignored, which a fresh interpreter inherits (a suite so launched once failed the comparison below).
    ignored = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        fresh = run_probe(probed, "-o", "dlperf_start=fresh", "--dlperf-json", "fresh.json", "--dlperf-log-dir", "logs")
    finally:
        for sig, handler in ignored.items():
            signal.signal(sig, handler)
    assert len(capped) == 2 and len(runs) >= 4 and len(fresh) == 1
    server = runs[0]["ppid"]
    # Forked by one server, the same across sessions of this process; a fresh worker's parent is the controller.
    assert "pytest_dlperf.worker.forkserver" in runs[0]["parent"]
    assert {seen["ppid"] for seen in capped + runs} == {server} and server != os.getpid()
    assert fresh[0]["ppid"] == os.getpid()
    # Its own pid, session and process group.
    pids = [seen["pid"] for seen in capped + runs + fresh]
    assert len(set(pids)) == len(pids) and server not in pids
    assert all(seen["pgid"] == seen["sid"] == seen["pid"] for seen in capped + runs + fresh)
    # Its own run id, in os.environ and in the environment block other processes read (/proc/PID/environ).
    run_ids = [seen["run_id"] for seen in runs]
    assert all(seen["proc_run_id"] == seen["run_id"] for seen in capped + runs + fresh)
    assert len(set(run_ids)) == len(run_ids) and forkserver.RUN_ID_PLACEHOLDER not in run_ids
    # Its own environment, and nothing an earlier run set in its own.
    assert all(seen["home"] == str(probed.path) for seen in runs + fresh)
    assert [(seen["leaked_env"], seen["leaked_module"]) for seen in capped + runs + fresh] == [(None, None)] * len(pids)
    # Its own memory cap: the trials', not the runs' after them.
    assert all(seen["rlimit_as"] != resource.RLIM_INFINITY for seen in capped)
    assert all(seen["rlimit_as"] == resource.RLIM_INFINITY for seen in runs + fresh)
    # Its own random state: torch's seed drawn per process where a fresh process draws one (torch 2.14 does),
    # its stream from the start (an earlier run drew 1000 more); Python's and numpy's drawn anew.
    fixed = torch_seeds_are_fixed(fresh[0]["torch_seed"])
    assert [seen["torch_draw"] == torch.rand(3, generator=torch.Generator().manual_seed(seen["torch_seed"])).tolist()
            for seen in capped + runs + fresh] == [True] * len(pids)
    seeds = [seen["torch_seed"] for seen in capped + runs + fresh]
    assert len(set(seeds)) == (1 if fixed else len(seeds))
    for key in ("random", "numpy"):
        values = [seen[key] for seen in capped + runs + fresh]
        assert len(set(values)) == len(values), key
    # The rest as a fresh worker sees it: no CUDA context, its folder, its arguments, the allocator's settings
    # in the environment it was started with.
    for seen in capped + runs:
        assert seen["cuda_initialized"] is False
        for key in ("cwd", "path0", "proc_tunables", "tunables"):
            assert seen[key] == fresh[0][key], key
        assert seen["argv"][0] == fresh[0]["argv"][0] and seen["argv"][1].endswith("spec.json")
    assert fresh[0]["tunables"] == STEADY and fresh[0]["proc_tunables"]  # glibc cuts its own copy short
    # One intra-op thread, the default, forked or fresh: the variable it started with, as torch reads it.
    assert [(seen["threads"], seen["proc_omp"]) for seen in capped + runs + fresh] == [(1, "1")] * len(pids)
    # How each run's worker started is recorded, per run and per case; and a forked worker's process differs from
    # a fresh one's in nothing a start could change (threads, affinity, gc, flags, signals, limits, backend flags,
    # import hooks, environment) but what is each process's own (worker/process_state.py).
    forked_case, fresh_case = (probed.results(name)["cases"][0] for name in ("forked.json", "fresh.json"))
    assert (forked_case["start"], fresh_case["start"]) == ("forked", "fresh")
    forked_runs, fresh_runs = (case["attempts"][-1]["runs"] for case in (forked_case, fresh_case))
    assert {run["start"] for run in forked_runs} == {"forked"} and fresh_runs[0]["start"] == "fresh"
    assert "baseline measured with workers started fresh; these runs' started forked" in forked_case["message"]
    states = [json.loads((probed.path / run["log_dir"] / "process-rank0.json").read_text())
              for run in (forked_runs[-1], fresh_runs[0])]
    assert process_state.differences(*states, ignore=process_state.OWN | {"environment"}) == {}
    # The same variables, and the same values of those read at start (the rest differ by the probe's own
    # DLPERF_PROBE_LEAK, its pid: only their digest is kept).
    environments = [state["environment"] for state in states]
    assert environments[0]["kept"] == environments[1]["kept"] and environments[0]["others"] == environments[1]["others"]
    assert states[0]["pid"] != states[1]["pid"] and states[0]["torch"]["num_threads"] == 1


def test_the_ranks_of_a_cpu_job_are_forked_each_a_process_of_its_own(probed):
    # The 2-rank case alone measures its 1-rank reference first (RANK unset): a plain forked worker.
    both = run_probe(probed, "--dlperf-gpus", "2")
    one = [seen for seen in both if seen["rank"] is None]
    ranks = [seen for seen in both if seen["rank"] is not None]
    assert len(one) == 1 and sorted(seen["rank"] for seen in ranks) == ["0", "1"]
    # torchrun's agent forked by a fork server (that of the ranks' start-time variables: OMP_NUM_THREADS, one
    # thread each by default), each rank forked by the agent.
    agent = ranks[0]["ppid"]
    assert {seen["ppid"] for seen in ranks} == {agent} and agent not in (one[0]["pid"], one[0]["ppid"])
    assert len({seen["grandparent"] for seen in ranks}) == 1
    assert all("pytest_dlperf.worker.forkserver" in seen["grandparent_cmdline"] for seen in ranks)
    assert all("pytest_dlperf.worker.forkserver" in seen["parent"] for seen in ranks)  # a fork of it: its command
    # Each its own process, session (as torchrun starts a rank), random state and run-tagged environment.
    assert len({seen["pid"] for seen in ranks}) == 2
    assert all(seen["pgid"] == seen["sid"] == seen["pid"] for seen in ranks)
    assert len({seen["torch_seed"] for seen in ranks + one}) == (1 if torch_seeds_are_fixed() else 3)
    assert len({seen["random"] for seen in ranks + one}) == len({seen["numpy"] for seen in ranks + one}) == 3
    assert all(seen["proc_run_id"] == seen["run_id"] != one[0]["run_id"] for seen in ranks)
    assert all(seen["leaked_env"] is None and seen["leaked_module"] is None for seen in ranks)
    assert all(seen["cuda_initialized"] is False for seen in ranks)
    # One intra-op thread in each rank and in the reference, the default.
    assert [(seen["threads"], seen["proc_omp"]) for seen in ranks + one] == [(1, "1")] * 3


def test_a_start_time_variable_gets_a_server_of_its_own(probed):
    steady = run_probe(probed)
    # Another allocator and another thread count (dlperf_cpu_threads): each worker has what its run was given.
    system = run_probe(probed, "-o", "dlperf_malloc=system", "-o", "dlperf_cpu_threads=2")
    assert steady[0]["tunables"] == STEADY and steady[0]["proc_tunables"]
    assert system[0]["tunables"] is None and system[0]["proc_tunables"] is None
    assert (steady[0]["threads"], system[0]["threads"]) == (1, 2) and system[0]["proc_omp"] == "2"
    assert steady[0]["ppid"] != system[0]["ppid"]
    assert "pytest_dlperf.worker.forkserver" in system[0]["parent"]


def test_a_killed_server_fails_its_run_in_one_line_and_leaves_nothing(probed):
    result = probed.run("--dlperf-model", "killserver,tiny", "-o", "dlperf_timeout=120")
    result.assert_outcomes(failed=1, passed=1)  # the next case got a new server
    result.stdout.fnmatch_lines([
        "killserver-fp32-bs4-gpu1: the fork server (pid *) ended with signal SIGKILL while this run's worker "
        "(pid *) ran; the run's processes were killed (dlperf_start=fresh starts each worker as a process "
        "of its own)"])
    worker, grandchild, server = (int(p) for p in (probed.path / "pids").read_text().split())
    assert wait_gone([worker, grandchild, server], 5.0) == []


def test_a_server_that_cannot_start_leaves_the_worker_to_start_on_its_own(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pynvml.py").write_text("raise RuntimeError('this pynvml is broken')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(broken), os.environ.get("PYTHONPATH", "")]))
    stderr = tmp_path / "stderr.log"
    assert forkserver.start(["pytest_dlperf.worker", "spec.json"], env, str(tmp_path), tmp_path / "stdout.log",
                            stderr) is None
    note = stderr.read_text()
    assert note.startswith("dlperf: no fork server (the fork server (pid ") and "exit status 1" in note
    assert "RuntimeError: this pynvml is broken" in note and "started as a process of its own" in note
    # Not tried again for that environment.
    with pytest.raises(forkserver.ServerError, match="this pynvml is broken"):
        forkserver.server_for(env)


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_an_interrupted_or_killed_session_leaves_no_process(probed, how):
    # SIGINT at its default, as in a terminal's foreground job: a suite started in the background of a
    # non-interactive shell (`cmd &`, nohup) has it ignored, and Python then never raises KeyboardInterrupt
    # (2026-11-26: the cause of this test's occasional hang, SigIgn 0x1001007 in both processes).
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGINS_OFF,
         "--dlperf-device", "cpu", "--dlperf-model", "hang", "--dlperf-warmup-steps", "1"],
        cwd=probed.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pid_file = probed.path / "pids"
    deadline = time.monotonic() + 120
    while not pid_file.exists() or len(pid_file.read_text().split()) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, "the case never started"
        time.sleep(0.1)
    pids = [int(p) for p in pid_file.read_text().split()]  # the worker, its child and the fork server
    server_log = Path(os.readlink(f"/proc/{pids[2]}/fd/2"))  # its stderr: a file of its own in the temp folder
    assert server_log.name.startswith("dlperf-forkserver-") and server_log.exists()
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: pytest's process group
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # where it is stuck: pytest's faulthandler prints every thread on SIGABRT
            # Whether SIGINT (bit 1 of these masks) was ignored, blocked or left pending says why.
            try:
                with open(f"/proc/{proc.pid}/status", encoding="utf-8") as handle:
                    masks = "".join(line for line in handle if line.startswith(("SigPnd", "ShdPnd", "SigBlk",
                                                                                "SigIgn", "SigCgt")))
            except OSError as exc:
                masks = f"(no /proc status: {exc})"
            proc.send_signal(signal.SIGABRT)
            try:
                out = proc.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                out = proc.communicate()[0]
            with open("/proc/self/status", encoding="utf-8") as handle:  # what the session inherited from here
                ours = "".join(line for line in handle if line.startswith(("SigBlk", "SigIgn")))
            pytest.fail(f"the session did not end within 60 s of its interrupt; its signal masks then:\n{masks}"
                        f"this test process's:\n{ours}"
                        f"\n{out[-12000:]}")
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    else:
        proc.kill()
        proc.wait()
    assert wait_gone(pids, 10.0) == []
    assert not server_log.exists(), "the fork server's log outlived the session"  # however the session ended


def test_the_server_starts_no_thread_and_never_cuda():
    done = preloaded_interpreter()  # the seed's check may have run it already
    assert done.returncode == 0 and done.stdout.split()[:1] == ["False"] and len(done.stdout.split()) == 2, done.stderr
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with pytest.raises(RuntimeError, match="runs Python threads"):
            server_side.check_clean()
    finally:
        stop.set()
        thread.join()


def test_which_variables_a_server_is_chosen_by():
    base = {"PATH": "/bin", "OMP_NUM_THREADS": "1"}
    late = {**base, "HOME": "/elsewhere", "DLPERF_RUN_ID": "0" * 32, "PYTEST_CURRENT_TEST": "t.py::x (call)"}
    assert forkserver.start_key(late) == forkserver.start_key(base)
    assert forkserver.start_key({**base, "OMP_NUM_THREADS": "2"}) != forkserver.start_key(base)
    assert forkserver.start_key({**base, "GLIBC_TUNABLES": STEADY}) != forkserver.start_key(base)


def test_a_run_id_must_fit_the_placeholder():
    with pytest.raises(ValueError, match="not 32"):
        server_side.tag_run("short")


def test_the_first_fork_finds_torch_dynamo_and_torchvision_imported(tmp_path):
    # Constructing any torch optimizer imports torch._dynamo (1.5 s of CPU, sympy with it): a worker forked before the
    # server imported it would pay that itself, and every session's first run did.  A server of its own: the
    # environment's PYTHONPATH makes its key.
    folder = tmp_path / "mods"
    folder.mkdir()
    (folder / "seen_modules.py").write_text(textwrap.dedent("""
        import sys
        with open(sys.argv[1], "w") as handle:
            handle.write(str(["torch._dynamo" in sys.modules, "torchvision" in sys.modules]))
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    try:
        out = tmp_path / "seen"
        worker = forkserver.start(["seen_modules", str(out)], env, str(tmp_path), tmp_path / "stdout.log",
                                  tmp_path / "stderr.log")
        assert worker is not None and worker.server is forkserver.server_for(env), (tmp_path / "stderr.log").read_text()
        assert worker.wait(60) == 0, (tmp_path / "stderr.log").read_text()
        assert out.read_text() == "[True, True]"
    finally:
        with forkserver._servers_lock:  # this test's server only: the other tests' stay
            ours = forkserver._servers.pop(forkserver.start_key(env), None)
        if ours is not None:
            ours.close()
