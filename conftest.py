"""Shared fixtures for pytest-dlperf's own tests.

The plugin is tested as pytest plugins are: ``pytester`` runs an inner pytest session in a
temporary folder, and that session's cases launch real worker processes that train the
registry's ``tiny`` convnet on the CPU for a few steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

# pytester's in-process runs remove the modules an inner session imported, and torch's C
# extension cannot be imported a second time in one process: import it once, out here.
import torch  # noqa: F401  isort: skip
import torchvision  # noqa: F401  isort: skip

pytest_plugins = ("pytester", "tests.cluster")

# A few steps are enough to exercise the whole path; each case still starts a fresh worker.
FAST = ("--dlperf-device", "cpu", "--dlperf-warmup-steps", "2", "--dlperf-steps", "5",
        "--dlperf-repeats", "2", "-p", "no:cacheprovider", "-p", "no:benchmark")


class DlperfTester:
    """``pytester`` plus helpers to write baselines and run fast CPU cases."""

    def __init__(self, pytester: pytest.Pytester):
        self.pytester = pytester
        self.path = pytester.path

    def baseline(self, cases: Iterable[Mapping[str, Any]], name: str = "baseline.json",
                 **top: Any) -> str:
        document = {
            "schema_version": 1,
            "kind": "dlperf-baseline",
            "hardware": {"device": "cpu"},
            "provenance": {"source": "test fixture"},
            **top,
            "cases": [dict(c) for c in cases],
        }
        path = self.path / name
        path.write_text(json.dumps(document, indent=2))
        return str(path)

    def run(self, *args: str, fast: bool = True) -> pytest.RunResult:
        # In-process runs see pytest_dlperf already imported by the outer session.
        return self.pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                       *(FAST if fast else ()), *args)

    def run_subprocess(self, *args: str, fast: bool = True, timeout: float = 300) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*(FAST if fast else ()), *args, timeout=timeout)

    def results(self, name: str = "results.json") -> dict[str, Any]:
        return json.loads((self.path / name).read_text())


@pytest.fixture
def dlperf(pytester: pytest.Pytester) -> DlperfTester:
    return DlperfTester(pytester)


def tiny_case(throughput: float, **fields: Any) -> dict[str, Any]:
    """A baseline entry for the tiny model (fp32, batch 32, 1 rank) unless fields say otherwise."""
    entry = {"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1,
             "throughput": throughput, "unit": "img/s"}
    entry.update(fields)
    return entry


@pytest.fixture
def make_tiny_case():
    return tiny_case
