"""``dlperf_bisect_exit``: the exit status ``git bisect run`` reads (docs/triage.md), as a table of
verdicts, and a real bisection: a git repository of a conftest model whose third commit gives its step
twenty-four times the layers, a baseline saved at the first, and ``git bisect run`` with the option names the third."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_dlperf.controller.bisect import ABORT, BAD, GOOD, SKIP, bisect_exit
from pytest_dlperf.results.case import Status
from tests.fixtures import UNUSED_PLUGINS

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(("verdicts", "exitstatus", "expected"), [
    ([Status.PASS], OK, GOOD),
    ([Status.PASS, Status.IMPROVED, Status.SKIPPED], OK, GOOD),
    ([Status.FAIL], FAILED, BAD),
    ([Status.FAIL, Status.INCONCLUSIVE, Status.ERROR], FAILED, BAD),  # a regression outweighs what did not decide
    ([Status.INCONCLUSIVE], OK, SKIP),  # undecided, or two busy runs in a row: pytest alone says 0 (good)
    ([Status.PASS, Status.INCONCLUSIVE], OK, SKIP),
    ([Status.ERROR], FAILED, SKIP),  # this commit's training crashed: it cannot be measured
    ([Status.NO_BASELINE], OK, SKIP),
    ([], pytest.ExitCode.NO_TESTS_COLLECTED, SKIP),
    ([Status.SKIPPED], OK, SKIP),
    ([Status.PASS], FAILED, SKIP),  # an output the job asked for was not written
    ([Status.PASS], pytest.ExitCode.INTERRUPTED, ABORT),
])
def test_the_exit_status_of_each_verdict(verdicts, exitstatus, expected):
    assert bisect_exit(verdicts, exitstatus) == expected


def test_the_history_gate_marks_the_commit_bad():
    assert bisect_exit([Status.PASS], FAILED, gate_failed=True) == BAD


#: The model of each commit: LAYERS hidden layers a step (docs/triage.md's example).  torch is imported where the
#: model is built, in the worker: each of the bisection's sessions is a process of its own, whose controller needs
#: only the model's name (torch's import there would cost each 3 s of CPU).
CONFTEST = '''from pytest_dlperf import register_model

LAYERS = {layers}


@register_model("my-mlp", task="regression", batch_size=128, defaults={{"in_features": 128}})
def my_mlp(settings):
    from torch import nn

    width = settings["in_features"]
    hidden = [m for _ in range(LAYERS) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*hidden, nn.Linear(width, 1))
'''
#: Cheap runs, and a tolerance (saved in the baseline) well under the slowdown being chased, as docs/triage.md
#: bisects.  The margins are wide because the host is not what this test is about: on the 2-core VM, with other
#: test suites beside it, the same runs measured up to twice as fast in one minute as in another, and a fourfold
#: slowdown at a 50% tolerance once read as INCONCLUSIVE (the baseline saved in a slow minute, the slow commit
#: judged in a fast one), which bisect skips.  Busy runs are counted for the same reason.  Windows of 40 steps: at
#: 100 the slower commit's session (about 1,500 samples/s on the loaded VM, 8.5 s a window) took 82 of the test's
#: 160 s.  Runs of 40 steps varied no more than runs of 100 (3 saves of 5 runs each: CV 4-5% against 9-25%); what moves
#: a figure is the minute it runs in, as above.  A 70% tolerance sits between the two errors bisect can make: the
#: slower commit reads 91-95% below (a baseline read 3.3x too fast still fails it), and the good commit once read 59%
#: below a baseline saved in a quiet minute (at 60%: INCONCLUSIVE, skipped); at 70% it passes a 3.3x slower minute.
#: Sixteen times the layers once read only 83% below (CI -90..-71%: INCONCLUSIVE, skipped) on an Intel Xeon VM
#: beside a spinning process, against a baseline saved in a minute at half the host's speed: twenty-four times.
CHEAP = ["--dlperf-device", "cpu", "--dlperf-warmup-steps", "5", "--dlperf-steps", "40", "-o", "dlperf_repeats=3",
         "--dlperf-tolerance", "0.7",
         "-o", "dlperf_max_interference=off"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_bisect_run_finds_the_commit_that_made_training_slower(dlperf, tmp_path: Path):
    repo = dlperf.path  # the save runs in-process (pytester's folder); the bisection's sessions are git's processes

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def commit(message: str, layers: int) -> str:
        (repo / "conftest.py").write_text(CONFTEST.format(layers=layers))
        (repo / "NOTES").write_text(message + "\n")
        git("add", "conftest.py", "NOTES")  # not the __pycache__ the sessions leave
        git("commit", "-q", "-m", message)
        return git("rev-parse", "HEAD").strip()

    git("init", "-q")
    good = commit("the model", 2)
    baseline = tmp_path / "baseline.json"  # outside the tree being bisected, as docs/triage.md keeps it
    save = dlperf.run("-p", "no:cacheprovider", "-m", "dlperf", *CHEAP, "--dlperf-model", "my-mlp",
                      "--dlperf-runs", "5", "-o", "dlperf_save_span=off", "--dlperf-save-baseline", str(baseline),
                      fast=False)
    assert save.ret == 0 and baseline.exists(), save.stdout.str()[-3000:]
    commit("a note", 2)
    slower = commit("twenty-four times the layers", 48)  # far off the 70% tolerance: load cannot hide it
    bad = commit("another note", 48)

    git("bisect", "start", bad, good)
    run = subprocess.run(["git", "bisect", "run", sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "-m", "dlperf", *CHEAP, "--dlperf-baseline", str(baseline), "--dlperf-max-runs", "8",
                          "-o", "dlperf_bisect_exit=true"], cwd=repo, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTEST_ADDOPTS=" ".join(UNUSED_PLUGINS)))  # pytester dropped the suite's
    out = run.stdout + run.stderr
    verdicts = "\n".join(line for line in out.splitlines()
                          if re.match(r"\s*(PASS|FAIL|INCONCLUSIVE|ERROR) my-mlp", line) or "first bad commit" in line)
    assert run.returncode == 0, verdicts + "\n" + out[-2000:]
    assert f"{slower} is the first bad commit" in out, out[-4000:]
    assert "FAIL my-mlp-fp32-bs128-gpu1:" in out  # the slower commit was judged, not skipped
