"""Faults: crashing, out-of-memory, hung and interrupted workers; no process is left behind."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_dlperf.launch import process as launch
from pytest_dlperf.launch import waiting
from tests.fixtures import PLUGINS_OFF, wait_gone

FAULTY = textwrap.dedent("""
    import os, subprocess, sys, time
    from pytest_dlperf import register_model

    HERE = os.path.dirname(__file__)

    def faulty(kind):
        # torch is imported where the worker builds the model: the SIGTERM test's pytest, a process of its own,
        # imports this conftest and no torch otherwise (3.7 s of CPU).
        import torch
        from torch import nn

        class Faulty(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3 * 4 * 4, 2)

            def forward(self, x):
                if kind == "raise":
                    raise ValueError("boom in forward")
                if kind == "exit":
                    print("about to die", file=sys.stderr, flush=True)
                    os._exit(7)
                if kind == "oom":
                    torch.empty(1 << 44)  # 64 TiB of float32: the CPU allocator refuses
                if kind == "hang":
                    # Leave a grandchild too: the whole process group must go.
                    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                    with open(os.path.join(HERE, "pids"), "w") as f:
                        f.write(f"{os.getpid()} {child.pid}")
                    time.sleep(600)
                return self.fc(x.flatten(1))

        return Faulty()

    for kind in ("raise", "exit", "oom", "hang"):
        register_model(f"faulty-{kind}", task="image-classification", batch_size=32,
                       defaults={"image_size": 4, "num_classes": 2},
                       factory=lambda settings, kind=kind: faulty(kind))
""")


def faulty_session(shared_run):
    """One session of every fault and then tiny, which passes: the session goes on after each fault.

    The time limit is for the hung worker; the others end (or fail) well within it. One
    session, not one per fault, spares a tiny worker and a session each.
    """
    return shared_run("faults: raise, exit, oom, hang, then tiny",
                      "--dlperf-model", "faulty-raise,faulty-exit,faulty-oom,faulty-hang,tiny",
                      "-o", "dlperf_timeout=12", "--dlperf-json", "results.json",
                      setup=lambda dlperf: dlperf.pytester.makeconftest(FAULTY))


def faulty_records(session):
    return {record["id"]: record for record in session.tester.results()["cases"]}


def test_a_crashing_worker_fails_its_case_and_the_session_goes_on(shared_run):
    session = faulty_session(shared_run)
    result = session.result
    result.assert_outcomes(failed=4, passed=1)
    records = faulty_records(session)
    assert records["faulty-raise-fp32-bs32-gpu1"]["verdict"] == records["faulty-exit-fp32-bs32-gpu1"]["verdict"] \
        == "error"
    assert records["tiny-fp32-bs32-gpu1"]["verdict"] == "no-baseline"
    out = result.stdout.str()
    assert "faulty-raise-fp32-bs32-gpu1: the worker failed: ValueError: boom in forward" in out
    assert "--- last lines of the worker's stderr" in out and 'raise ValueError("boom in forward")' in out
    result.stdout.fnmatch_lines([
        "faulty-exit-fp32-bs32-gpu1: the worker ended with exit status 7 and wrote no result",
        "--- last lines of the worker's stderr (*stderr.log) ---",
        "about to die",
    ])


def test_out_of_memory_is_named(shared_run):
    session = faulty_session(shared_run)
    session.result.assert_outcomes(failed=4, passed=1)
    session.result.stdout.fnmatch_lines(["faulty-oom-fp32-bs32-gpu1: out of memory at batch size 32 on *: *"])
    record = faulty_records(session)["faulty-oom-fp32-bs32-gpu1"]
    assert record["verdict"] == "error" and record["attempts"][0]["runs"][0]["status"] == "oom"


def test_a_hung_worker_is_killed_with_its_whole_process_group(shared_run):
    session = faulty_session(shared_run)
    session.result.assert_outcomes(failed=4, passed=1)
    session.result.stdout.fnmatch_lines([
        "faulty-hang-fp32-bs32-gpu1: timed out after 12 s (dlperf_timeout); the worker's process group was killed"])
    records = faulty_records(session)
    assert records["faulty-hang-fp32-bs32-gpu1"]["verdict"] == "error"
    assert records["tiny-fp32-bs32-gpu1"]["verdict"] == "no-baseline"  # the session went on after the kill
    pids = [int(p) for p in (session.tester.path / "pids").read_text().split()]
    assert wait_gone(pids, 2.0) == []
    assert records["faulty-hang-fp32-bs32-gpu1"]["duration"] < 120


def test_sigterm_to_pytest_mid_case_leaves_no_worker(dlperf):
    dlperf.pytester.makeconftest(FAULTY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGINS_OFF,
         "--dlperf-device", "cpu", "--dlperf-model", "faulty-hang", "--dlperf-warmup-steps", "1"],
        cwd=dlperf.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid_file = dlperf.path / "pids"
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "the case never started"
        time.sleep(0.1)
    pids = [int(p) for p in pid_file.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out or "Interrupted" in out
    assert wait_gone(pids, 5.0) == []


# --------------------------------------------------------------------------- launch, directly


def test_run_worker_kills_the_group_at_its_time_limit(tmp_path):
    script = "sleep 600 & echo $! > \"$(dirname \"$0\")/child\"; echo waiting >&2; sleep 600"
    started = time.monotonic()
    outcome = launch.run_worker({"case": {}}, tmp_path / "run", timeout=1.0,
                                command=["sh", "-c", script])
    assert outcome.timed_out and outcome.result is None
    assert time.monotonic() - started < 10
    assert outcome.stderr_tail() == "waiting"
    child = int((tmp_path / "run" / "child").read_text())
    assert wait_gone([child], 2.0) == []
    assert launch.describe_returncode(outcome.returncode) == "signal SIGTERM"


def test_leftovers_of_a_finished_worker_are_killed(tmp_path):
    script = "sleep 600 & echo $! > \"$(dirname \"$0\")/child\"; exit 0"
    outcome = launch.run_worker({"case": {}}, tmp_path / "run", timeout=30.0, command=["sh", "-c", script])
    assert not outcome.timed_out and outcome.returncode == 0
    assert wait_gone([int((tmp_path / "run" / "child").read_text())], 3.0) == []


def test_progress_moves_the_deadline(tmp_path):
    def deadline_from_progress(path, current, last_seen):  # what run_command does with each look at the file
        progress, seen = waiting.read_progress(path, last_seen)
        return waiting.deadline_from(progress, current), seen

    progress = tmp_path / "progress.json"
    deadline, seen = deadline_from_progress(progress, 123.0, 0)
    assert (deadline, seen) == (123.0, 0)  # nothing reported yet
    progress.write_text('{"step_seconds": 0.5, "remaining_steps": 100}')
    before = time.monotonic()
    deadline, seen = deadline_from_progress(progress, 123.0, 0)
    assert before + 3 * 0.5 * 100 + 60 <= deadline <= time.monotonic() + 3 * 0.5 * 100 + 60
    assert deadline_from_progress(progress, 1.0, seen) == (1.0, seen)  # unchanged file


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_lost_in_a_finalizer_still_ends_the_run_within_a_poll(tmp_path):
    """Python raises Ctrl-C's KeyboardInterrupt wherever the main thread is when it handles the signal; in a
    finalizer that is "Exception ignored" and lost.  The run's watch raises it again at its next look."""
    class Finalized:
        def __del__(self):
            time.sleep(1.5)  # SIGINT arrives here: its KeyboardInterrupt goes to sys.unraisablehook

    calls = []

    def on_progress(progress, elapsed):
        calls.append(elapsed)
        if len(calls) == 1:
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            Finalized()  # dropped at once: its __del__ runs now

    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    # Python's own SIGINT handler, as a session in a terminal has it (started in the background of a
    # non-interactive shell, this process has SIGINT ignored).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            launch.run_command([sys.executable, "-c", script], tmp_path / "run", timeout=60, on_progress=on_progress)
        assert time.monotonic() - start < 10 and len(calls) <= 4, calls
        assert wait_gone([int(pid_file.read_text())], 5.0) == []  # the run it interrupted is killed
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_return_codes_read_as_words():
    assert launch.describe_returncode(3) == "exit status 3"
    assert launch.describe_returncode(-9) == "signal SIGKILL"
    assert launch.describe_returncode(None) == "no exit status"
