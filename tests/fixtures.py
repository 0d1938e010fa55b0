"""Fixtures and helpers shared by pytest-dlperf's own tests (a plugin: the root conftest.py lists it).

The plugin is tested as pytest plugins are: ``pytester`` runs an inner pytest session in a
temporary folder, and that session's cases launch real worker processes that train the
registry's ``tiny`` convnet on the CPU for a few steps.

Fixtures: ``dlperf`` (a :class:`DlperfTester`), ``shared_run`` (an inner session that several
tests read, run once) and ``make_tiny_case`` (:func:`tiny_case`). Test modules that need a
helper outside a test (a module constant, a parametrization) import it:
``from tests.fixtures import FAST``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

__all__ = ["FAST", "PLUGINS_OFF", "UNUSED_PLUGINS", "DlperfTester", "SharedRun", "alive", "dlperf", "make_tiny_case",
           "nvml_works", "shared_run", "tiny_case", "wait_gone"]

# A few steps are enough to exercise the whole path; each case still starts a fresh worker.
# Interference detection off (CPU, memory bandwidth and core speed): on a shared test machine the neighbours'
# load would make every verdict inconclusive (tests/test_sequential.py turns it on where it is the subject).
# A save's runs as fast as they go (dlperf_save_span=off): its spacing is tested where it is the subject.
# Without hypothesis's and anyio's plugins, which an inner session does not use: a subprocess session
# starts about a second sooner without importing them.
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:anyio")
#: What every inner session leaves out: those, pytest's cache (no test reads it) and pytest-benchmark (its own tests
#: turn it on).  A session started as a process of its own that does not take FAST takes these.
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:benchmark", *UNUSED_PLUGINS)
FAST = ("--dlperf-device", "cpu", "--dlperf-warmup-steps", "2", "--dlperf-steps", "5",
        "-o", "dlperf_repeats=2", "-o", "dlperf_max_interference=off",
        "-o", "dlperf_save_span=off",
        *PLUGINS_OFF)


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


#: What pytest-xdist tells the processes of its workers.  An inner session is no xdist worker:
#: pytest-benchmark, for one, turns itself off where it sees PYTEST_XDIST_WORKER.
_XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture
def dlperf(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> DlperfTester:
    for name in _XDIST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return DlperfTester(pytester)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``pytest -n 2`` on 2 cores, each worker process the tests start trains on one thread.

    tests/test_measure.py and tests/test_data.py, each run beside a serial run of them: with
    ``-n 2`` 0.80 of the serial time (184 s and 167 s against 216 s and 230 s), with ``-n 2``
    and a thread each 0.73 (124 s against 164 s).  Cases of several ranks set their threads
    per rank themselves; an ``OMP_NUM_THREADS`` given stays.
    """
    # The sessions the tests start behave the same on a desk and in a CI job: a gating session that judged nothing
    # fails where CI is set (controller/coverage.py), and the tests of that set it themselves.
    os.environ.pop("CI", None)
    if hasattr(config, "workerinput"):  # an xdist worker
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        # The pytest sessions the tests start as processes (the benchmark scripts', the GPU check's dry runs) load
        # no plugin they never use: hypothesis's and anyio's cost a pytest start 1.1 of its 1.7 s here.  (Set in
        # the worker, after its own start: its tests use hypothesis.  pytester's own sessions drop the variable
        # and take FAST's blocks instead.)
        os.environ.setdefault("PYTEST_ADDOPTS", " ".join(UNUSED_PLUGINS))


#: Seconds each of the slowest test files took in a full run on the 2-core VM (2026-11-29 07:45, a fresh clone's
#: .ci/run, the sum of their JUnit times under ``-n 3``, scaled by 0.5 as the figures before them: 9:14 in all),
#: for :func:`pytest_collection_modifyitems`.
#: A file not named here runs after these, in its usual order; a figure that has drifted only makes the schedule a
#: little worse, never a test wrong.  (test_readme.py's quick start, 39 s, runs in .ci/wheel-check instead.)
FILE_SECONDS = {
    "test_gpu_check.py": 87, "test_launchers.py": 54, "test_fork_server.py": 44,
    "test_mlperf_commands.py": 31, "test_command_faults.py": 30, "test_history_site.py": 27,
    "test_nightly_examples.py": 27, "test_sequential.py": 27, "test_bisect.py": 25, "test_distributed.py": 23,
    "test_commands.py": 22, "test_attribution.py": 18, "test_compile_layout.py": 18, "test_measure.py": 17,
    "test_fuzz_baseline.py": 14, "test_cluster.py": 14, "test_data.py": 14, "test_faults.py": 14,
    "test_verdict_quality.py": 13, "test_markdown.py": 12, "test_ab.py": 11, "test_language_models.py": 11,
    "test_malloc.py": 10, "test_cpu_threads.py": 10, "test_benchmark_json.py": 10, "test_max_batch.py": 10,
    "test_phases.py": 10, "test_last_good.py": 9, "test_machine_identity.py": 9, "test_crash_messages.py": 8,
    "test_verdict_simulation.py": 8, "test_machine_baselines.py": 7, "test_environment.py": 7,
    "test_telemetry_flops.py": 7,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the slowest files first (:data:`FILE_SECONDS`), each file's tests in their order.

    .ci/run hands whole files to its workers (``--dist loadfile``) in this order
    (``--no-loadscope-reorder``; by default xdist sends the files with the most tests first, which sent the
    slowest, few-test files last: under ``-n 3`` the suite's last 90 s ran the GPU check's dry runs alone).  The
    longest first is the classic rule (Graham's LPT: within 4/3 of the best finish).
    """
    if not hasattr(config, "workerinput"):
        return
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.name, 0), order[id(item)]))


_preloaded = False


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first test this process runs, before its fixtures: torch and matplotlib imported, and everything
    imported so far left out of the garbage collector's full passes (``gc.freeze``).  Not for a test its marks
    skip (the skipping plugin's hook, ``tryfirst``, skips it first): a session whose tests all skip (tests/gpu
    without CUDA, as the GPU check's dry run runs it) imports none of it, 3.5 s of CPU on the 2-core VM.

    Each in-process inner session ends with pytest's own ``gc.collect()`` (twice), and long test files
    trigger full collections of their own: with torch, torchvision and ``torch._dynamo`` in the heap each
    took about 0.25 s on the 2-core VM, about half a second per inner session; frozen, a millisecond.
    What the tests make later is collected as ever.
    """
    global _preloaded
    if _preloaded:
        return
    _preloaded = True
    session = item.session
    import gc

    # pytester's in-process runs remove the modules an inner session imported, and torch's C extension cannot be
    # imported a second time in one process: imported once, here, before the first test.
    import torch  # noqa: F401 - imported by the first inner session anyway
    import torchvision  # noqa: F401

    # Likewise matplotlib: an inner session that imported it first had it removed after, and the next import made
    # classes of its own beside the old ones that pyplot still held ("Single argument to subplot must be a
    # three-digit integer, not GridSpec(1, 1)[0:1, 0:1]" in a later test of the same worker).
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except ImportError:  # the plot extra is not installed: its tests skip
        pass

    # hypothesis runs its plugins as it is imported: trio's registers its random generator, and checks that trio
    # holds it, which a check after the freeze could not see.  Not where its pytest plugin is left out (the
    # benchmark scripts' and the GPU check's sessions, PYTEST_ADDOPTS): there nothing imports it, and it costs
    # such a session 1.3 s.
    if session.config.pluginmanager.has_plugin("hypothesispytest"):
        try:
            import hypothesis  # noqa: F401 - trio holds it
        except ImportError:
            pass
    gc.collect()
    gc.freeze()


@dataclasses.dataclass
class SharedRun:
    """An inner session several tests read: its result, the tester whose folder it ran in, how long it took."""

    result: pytest.RunResult
    tester: DlperfTester
    seconds: float


@pytest.fixture(scope="session")
def _shared_runs() -> dict[str, SharedRun]:
    return {}


@pytest.fixture
def shared_run(dlperf: DlperfTester, _shared_runs: dict[str, SharedRun]):
    """``shared_run(key, *args, setup=None, fast=True)``: the inner session ``key``, run once per outer session.

    Each worker process costs seconds, so tests that check different facts of the same
    session share it: the first test that asks runs it (in-process, as ``dlperf.run``) in
    its own folder, after ``setup(dlperf)`` writes what the session needs there; later tests
    get the same :class:`SharedRun` and read its files through ``.tester``. Any one of them
    may run alone. ``key`` names the session: one key, one set of arguments.
    """
    def get(key: str, *args: str, setup: Callable[[DlperfTester], object] | None = None,
            fast: bool = True) -> SharedRun:
        if key not in _shared_runs:
            if setup is not None:
                setup(dlperf)
            started = time.monotonic()
            result = dlperf.run(*args, fast=fast)
            _shared_runs[key] = SharedRun(result, dlperf, time.monotonic() - started)
        return _shared_runs[key]

    return get


def tiny_case(throughput: float, **fields: Any) -> dict[str, Any]:
    """A baseline entry for the tiny model (fp32, batch 32, 1 rank) unless fields say otherwise."""
    entry = {"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1,
             "throughput": throughput, "unit": "img/s"}
    entry.update(fields)
    return entry


@pytest.fixture
def make_tiny_case():
    """:func:`tiny_case`, for tests that write baselines."""
    return tiny_case


# --------------------------------------------------------------------------- processes


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie waiting for its reaper is gone for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, seconds: float = 10.0) -> list[int]:
    """The pids still alive after waiting up to ``seconds`` for all of them to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


# --------------------------------------------------------------------------- GPUs


def nvml_works() -> bool:
    """NVML initializes on this machine (skips the test where pynvml is not installed)."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True
