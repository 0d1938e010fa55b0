"""Live progress (pytest_dlperf.reporting.live): what it says in each phase, and where it says it."""

from __future__ import annotations

import time

from pytest_dlperf.protocol import Progress
from pytest_dlperf.reporting.live import LiveProgress, describe


def test_each_phase_reads_as_a_user_expects():
    label = "tiny-fp32-bs32-gpu1"
    assert describe(label, 0, 1, None, 3.2, "img/s")[0] == "tiny-fp32-bs32-gpu1: starting (3 s)"
    assert describe(label, 1, 3, Progress(None, None, phase="compiling"), 12, "img/s")[0] == \
        "tiny-fp32-bs32-gpu1: run 2/3, compiling (12 s)"
    now = time.time()
    warm = Progress(0.5, 30, now, "warm-up", 5, 20, None, 5)
    line, key = describe(label, 0, 1, warm, 10, "img/s")
    assert line == "tiny-fp32-bs32-gpu1: warm-up 5/20, about 15 s left" and key == "0/0/warm-up"
    # Later warm-up steps keep the key: a CI log gets one line per phase, not one per step.
    assert describe(label, 0, 1, Progress(0.5, 20, now, "warm-up", 15, 20, None, 5), 15, "img/s")[1] == key
    measuring = Progress(0.5, 20, now, "measuring", 20, 20, 3, 5, 1234.56)
    assert describe(label, 0, 2, measuring, 40, "img/s", attempt=1)[0] == \
        "tiny-fp32-bs32-gpu1: re-measuring, run 1/2, window 4/5 (last 1234.6 img/s), about 1 min 10 s left"
    done = Progress(0.5, 0, now, "measuring", 20, 20, 5, 5, 99.0)
    assert describe(label, 0, 1, done, 50, "seq/s")[0] == "tiny-fp32-bs32-gpu1: windows done (last 99.0 seq/s)"


def test_a_ci_log_gets_plain_lines(dlperf):
    args = ("--dlperf-model", "tiny", "--dlperf-warmup-steps", "10", "--dlperf-steps", "20", "-o",
            "dlperf_repeats=2", "--dlperf-device", "cpu", "-p", "no:cacheprovider", "-p", "no:benchmark")
    result = dlperf.run(*args, fast=False)
    assert result.ret == 0
    lines = result.stdout.lines
    shown = [line for line in lines if line.startswith("dlperf: tiny-fp32-bs32-gpu1: ")]
    # The run's last progress is read after it exits, however short it was than the controller's poll.
    assert any("windows done" in line for line in shown), lines
    assert len(shown) == len(set(shown)) <= 8  # one line per phase or window, not one a second
    # pytest's own line starts again after them, so the result letter is not left alone on a line.
    assert any(line.startswith("dlperf ?") for line in lines), lines


def test_quiet_shows_no_progress(pytester):
    config = pytester.parseconfig("-q")
    config.pluginmanager.register(object(), "terminalreporter")  # a terminal exists, and -q still turns it off
    live = LiveProgress(config)
    live.start()
    assert not live.enabled
