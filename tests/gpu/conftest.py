"""tests/gpu: the ``gpu_check`` marker and the ``gpu`` fixture (inner pytest sessions on CUDA).

Every module here starts with ``pytestmark = GPU_TEST`` (``support.py``): the marker, and a
skip with the reason ("CUDA not available", "needs 2 GPUs, 1 visible") where the GPUs are
missing, so the default ``pytest`` run collects this folder and skips it in a second.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

# The inner sessions' options: CUDA, no cache or pytest-benchmark, no re-measurement, and a
# short measurement unless a test asks for more (a later option wins).
CUDA_ARGS = ("--dlperf-device", "cuda", "-p", "no:cacheprovider", "-p", "no:benchmark", "--dlperf-max-runs", "1",
             "--dlperf-warmup-steps", "3", "--dlperf-steps", "10", "-o", "dlperf_repeats=2")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_check: a test of tests/gpu; needs CUDA (skipped with the reason "
                                       "without it); benchmarks/gpu_check.sh runs them on a GPU machine")


class GpuSession:
    """The root conftest's ``dlperf`` tester, with cases on CUDA."""

    def __init__(self, dlperf: Any):
        self.dlperf = dlperf
        self.pytester = dlperf.pytester
        self.path = dlperf.path

    def conftest(self, source: str) -> None:
        """The inner session's conftest.py: a probe model its workers import too."""
        self.pytester.makeconftest(source)

    def run(self, *args: str) -> pytest.RunResult:
        """An in-process inner session; its workers are fresh processes, as always."""
        return self.dlperf.run(*CUDA_ARGS, *args, fast=False)

    def run_subprocess(self, *args: str, timeout: float = 300) -> pytest.RunResult:
        """An inner session in a process of its own: one that sees this test's environment
        variables (``CUDA_VISIBLE_DEVICES``) from its start."""
        return self.dlperf.run_subprocess(*CUDA_ARGS, *args, fast=False, timeout=timeout)

    def results(self, name: str = "results.json") -> dict[str, Any]:
        return json.loads((self.path / name).read_text())


@pytest.fixture
def gpu(dlperf) -> GpuSession:
    return GpuSession(dlperf)
