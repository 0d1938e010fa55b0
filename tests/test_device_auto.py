"""``--dlperf-device auto`` on a machine without a GPU: said in the header, and before a GPU-sized case."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="auto resolves to CUDA on this machine")

STEPS = ("--dlperf-warmup-steps", "1", "--dlperf-steps", "2", "-o", "dlperf_repeats=1", "-p", "no:cacheprovider",
         "-p", "no:benchmark")


def test_the_header_says_auto_resolved_to_the_cpu_and_a_small_case_gets_no_warning(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", *STEPS, fast=False)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["dlperf: device auto -> cpu (no CUDA device is visible: every case trains on the "
                                 "CPU), no baseline"])
    assert "sized for a GPU" not in result.stdout.str()


def test_a_gpu_sized_case_on_the_cpu_is_warned_about_before_it_starts(dlperf):
    # The worker is stopped after half a second: the warning comes before the case, whatever it does.
    result = dlperf.run("--dlperf-model", "resnet50", "--dlperf-precision", "amp", "-o", "dlperf_timeout=0.5", *STEPS,
                        fast=False)
    lines = result.stdout.lines
    warning = next(i for i, line in enumerate(lines) if "sized for a GPU" in line)
    assert lines[warning].startswith("dlperf: resnet50-amp-bs256-gpu1 is sized for a GPU (6.2 TFLOP a step) and "
                                     "trains on the CPU, because --dlperf-device auto found no GPU")
    progress = next(i for i, line in enumerate(lines) if line.startswith("dlperf F"))
    assert warning < progress


def test_an_explicit_cpu_device_is_not_warned_about(dlperf):
    result = dlperf.run("--dlperf-model", "resnet50", "--dlperf-device", "cpu", "-o", "dlperf_timeout=0.5", *STEPS,
                        fast=False)
    assert "sized for a GPU" not in result.stdout.str()
    result.stdout.fnmatch_lines(["dlperf: device cpu, no baseline"])
