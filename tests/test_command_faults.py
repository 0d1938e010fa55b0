"""Command cases that go wrong: pytest SIGKILLed mid-case (no orphan, on every launcher), a hung command, a
command that never stops by itself (stopped once measured).

The orphan tests run pytest as a process of its own, SIGKILL it while its command case runs
(``tests/commands/train_sleepy.py``, which also starts a child in a session of its own), and
look for every process the command started: none may be left.  The hung command runs in an
inner session with a shorter slack than the 60 s of a real run (``follow.SLACK_SECONDS``),
so that it is found hung within seconds; :class:`LogFollower`'s limit is also fed a clock.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_dlperf.commands import follow, parsers
from tests.fixtures import FAST, wait_gone

SCRIPT = Path(__file__).parent / "commands" / "train_sleepy.py"
PATTERN = r"\[rank (?P<rank>\d+)\] iter (?P<step>\d+) batch_cost (?P<step_time>[\d.]+) s"
CONFTEST = f"""
import sys
from pytest_dlperf import register_command

register_command("sleepy", [sys.executable, {str(SCRIPT)!r}, "forever", "{{data_dir}}"], scope="rank",
                 pattern={PATTERN!r})
register_command("hangs", [sys.executable, {str(SCRIPT)!r}, "hang", "3"], pattern={PATTERN!r})
"""


def _sigkill_mid_case(pytester: pytest.Pytester, ranks: int, *args: str, env: dict[str, str] | None = None) -> None:
    """Start pytest on the sleepy command case with ``ranks`` ranks, SIGKILL it once every rank and its child
    run, and check that none of them is left."""
    pytester.makeconftest(CONFTEST)
    pids_dir = pytester.path / "pids"
    pids_dir.mkdir()
    pytest_proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *FAST, "--dlperf-model", "sleepy", "--dlperf-gpus", str(ranks),
         "--dlperf-data-dir", str(pids_dir), *args],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list(pids_dir.iterdir())) < 2 * ranks:
        if pytest_proc.poll() is not None or time.monotonic() > deadline:
            pytest_proc.kill()
            pytest.fail(f"the case never started its {ranks} rank(s):\n{pytest_proc.communicate()[0]}")
        time.sleep(0.1)
    pids = [int(p.name) for p in pids_dir.iterdir()]
    pytest_proc.kill()  # SIGKILL: nothing of pytest can clean up
    pytest_proc.communicate(timeout=30)
    assert pytest_proc.returncode == -signal.SIGKILL
    # The watching parent sends SIGTERM, and SIGKILL after 5 s to what is left.
    assert wait_gone(pids, 15.0) == [], "processes of the run outlived pytest"


@pytest.mark.parametrize("ranks", [1, 2], ids=["local", "torchrun"])
def test_sigkill_of_pytest_mid_command_leaves_no_process(pytester, ranks):
    _sigkill_mid_case(pytester, ranks)


def test_sigkill_of_pytest_mid_command_under_mpirun_leaves_no_process(pytester, mpirun):
    argv = mpirun.argv(2)[1:]  # the fixture's site arguments, without "mpirun" and its -np
    np_at = argv.index("-np")
    _sigkill_mid_case(pytester, 2, "--dlperf-launcher", "mpi", "--dlperf-launcher-args",
                      shlex.join(argv[:np_at] + argv[np_at + 2:]), env=mpirun.env)


def test_sigkill_of_pytest_mid_command_under_srun_leaves_no_process(pytester, slurm_cluster):
    # An allocation that outlives pytest (salloc --no-shell): its end cannot be what ends the step.
    granted = slurm_cluster.run(["salloc", "--no-shell", "-N1", "-n2"], timeout=60)
    job = re.search(r"Granted job allocation (\d+)", granted.stderr + granted.stdout).group(1)
    try:
        env = {**slurm_cluster.env, "SLURM_JOB_ID": job, "SLURM_JOB_NUM_NODES": "1", "SLURM_NTASKS": "2"}
        _sigkill_mid_case(pytester, 2, "--dlperf-launcher", "slurm", env=env)
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def test_a_hung_command_fails_within_its_limit_naming_its_last_line(dlperf, monkeypatch):
    monkeypatch.setattr(follow, "SLACK_SECONDS", 2.0)
    dlperf.pytester.makeconftest(CONFTEST)
    started = time.monotonic()
    result = dlperf.run("--dlperf-model", "hangs", "--dlperf-json", "results.json")
    result.assert_outcomes(failed=1)
    (case,) = dlperf.results()["cases"]
    # Three logged steps of 0.2 s and 9 to go of the 12 (2 warm-up + 5 x 2): 3 x 0.2 x 9 + 2 s after the third.
    limit = float(re.search(r"hung after (\d+) s", case["message"]).group(1))
    assert 5 <= limit <= 30, case["message"]
    assert ("it logged nothing the parser reads for" in case["message"]
            and "after 3 logged step(s) of up to 0.2" in case["message"])
    assert "its last line: '[rank 0] iter 3 batch_cost 0.2 s'" in case["message"]
    assert case["verdict"] == "error" and case["attempts"][0]["runs"][0]["status"] == "timeout"
    assert time.monotonic() - started < 60


STOPPED = f"""
import sys
from pytest_dlperf.commands import Parser, Record, register_parser

@register_parser("sleepy-log")  # the name first, as register_command and register_model take it
class SleepyLog(Parser):
    def parse_line(self, line):
        return [Record(step_time=float(line.split()[-2]))] if " batch_cost " in line else []

from pytest_dlperf import register_command
register_command("forever", [sys.executable, {str(SCRIPT)!r}, "forever", "{{data_dir}}"], parser="sleepy-log")
"""


@pytest.mark.parametrize("ranks", [1, 2], ids=["local", "torchrun"])
def test_a_command_that_never_stops_is_stopped_once_measured_and_counts(dlperf, ranks):
    # train_sleepy.py logs a step every 0.2 s for ever on each rank, and starts a child in a session of its own.
    dlperf.pytester.makeconftest(STOPPED)
    pids_dir = dlperf.path / "pids"
    pids_dir.mkdir()
    result = dlperf.run("--dlperf-model", "forever", "--dlperf-gpus", str(ranks), "--dlperf-runs", "1",
                        "--dlperf-data-dir", str(pids_dir), "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    (case,) = dlperf.results()["cases"]
    (run,) = case["attempts"][0]["runs"]
    needed = 2 + 5 * 2  # FAST: warm-up + steps x repeats
    logged = run["command"]["stopped_after"]
    # Ended within a few seconds of its 12th step: it logs a step every 0.2 s until it is gone, so the steps after
    # the 12th count the seconds (the log is read once a second; torchrun's start is not the stop's).
    assert needed <= logged <= needed + 25, run
    assert run["status"] == "ok" and case["throughput"] == pytest.approx(32 * ranks / 0.2)
    assert len(list(pids_dir.iterdir())) >= 2 * ranks  # each rank and its child: none left (below)
    assert f"stopped after {logged} logged steps (the case needs {needed}" in case["message"]
    assert wait_gone([int(p.name) for p in pids_dir.iterdir()], 5.0) == [], "the script or its child outlived the run"


# --------------------------------------------------------------------------- the limit, on a clock of our own


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_limit_follows_the_steps_as_they_arrive(tmp_path):
    log = tmp_path / "stdout.log"
    log.write_text("loading\n")
    clock = Clock()
    def regex():
        return parsers.make("regex", {"pattern": PATTERN})

    watch = follow.LogFollower(lambda: [log, tmp_path / "not-yet.log"], regex, expected_steps=12, startup=300.0,
                               samples_per_step=8, clock=clock)
    watch.poll()
    assert watch.deadline == 100.0 + 300.0 and watch.last_line == "loading"  # no step yet: the startup limit
    clock.now = 150.0
    with open(log, "a") as out:
        out.write("[rank 0] iter 1 batch_cost 0.5 s\n[rank 0] iter 2 batch_cost 0.5 s\n[rank 0] iter 3 batch")
    watch.poll()
    # Two steps of 0.5 s (they arrived together): 3 x 0.5 x 10 left + 60 s; the unfinished line waits.
    assert watch.steps == 2 and watch.deadline == pytest.approx(150.0 + 15.0 + 60.0)
    clock.now = 160.0
    with open(log, "a") as out:
        out.write("_cost 0.5 s\n")
    watch.poll()
    # The third arrived 10 s after the second: the step time is the longest seen.
    assert watch.steps == 3 and watch.deadline == pytest.approx(160.0 + 3 * 10.0 * 9 + 60.0)
    assert watch.last_line == "[rank 0] iter 3 batch_cost 0.5 s"
    progress = watch.progress(warmup=2, window=5, windows=2)
    assert progress.phase == "measuring" and progress.windows_done == 0 and progress.remaining_steps == 9
    # A time-to-train case does not know its steps: one more, at most 3 step times + 60 s away.
    timed = follow.LogFollower(lambda: [log], regex, expected_steps=None, startup=300.0, clock=clock)
    timed.poll()
    assert timed.deadline == pytest.approx(160.0 + 3 * 0.5 + 60.0)
    assert "hung after 9 s: it logged nothing the parser reads for 0 s after 3 logged step(s)" in timed.hung(9.0)


def test_the_guard_ends_as_its_command_did(tmp_path):
    from pytest_dlperf.commands import guard

    for script, code in (("exit 3", 3), ("kill -TERM $$", -signal.SIGTERM), ("kill -KILL $$", -signal.SIGKILL)):
        assert subprocess.run(guard.wrap(["sh", "-c", script])).returncode == code
    missing = subprocess.run(guard.wrap([str(tmp_path / "no-such-script")]), capture_output=True, text=True)
    assert missing.returncode == guard.CANNOT_RUN and "cannot run" in missing.stderr
    assert json.loads(subprocess.run(guard.wrap([sys.executable, "-c", "import json, os; print(json.dumps(os.getpgid(0)"
                                                 " == os.getpgid(os.getppid())))"]), capture_output=True,
                                     text=True).stdout)  # the command is in the guard's process group
