"""dlperf cases in pytest-benchmark's JSON and storage, read back by ``pytest-benchmark compare``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures import FAST, tiny_case
from pytest_dlperf.reporting import benchmark_json
from pytest_dlperf import environment
from pytest_dlperf.results.case import CaseResult

# The dlperf fixture's fast arguments, with pytest-benchmark left on.
WITH_BENCHMARK = FAST[:FAST.index("no:benchmark") - 1] + FAST[FAST.index("no:benchmark") + 1:]
assert "no:benchmark" not in WITH_BENCHMARK and "no:cacheprovider" in WITH_BENCHMARK


def run(dlperf, *args: str) -> pytest.RunResult:
    return dlperf.pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *WITH_BENCHMARK, *args)


def _record(seconds: list[float], samples: int = 160, **fields) -> CaseResult:
    """A measured case record as the plugin keeps it, with one run of these windows."""
    windows = [{"steps": 5, "samples": samples, "seconds": s, "throughput": samples / s} for s in seconds]
    record = {"id": "tiny-fp32-bs32-gpu1", "nodeid": "dlperf::tiny-fp32-bs32-gpu1",
              "case": {"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1, "settings": {}},
              "unit": "img/s", "verdict": "no-baseline", "message": "m", "throughput": 100.0,
              "stats": {"cv": 0.01}, "baseline": None, "difference": None, "device": {"type": "cpu"},
              "parameters": {"steps": 5}, "attempts": [{"throughput": 100.0, "runs": [{"windows": windows}]}]}
    record.update(fields)
    return CaseResult.from_dict(record)


def test_each_window_is_a_round_timed_per_sample_so_ops_is_the_throughput():
    bench = benchmark_json.to_benchmark(_record([1.6, 2.0, 1.2]), {"steps": 5})
    data = bench.as_dict()
    assert (data["name"], data["fullname"], data["group"]) == ("tiny-fp32-bs32-gpu1", "dlperf::tiny-fp32-bs32-gpu1",
                                                               "dlperf tiny (img/s)")
    assert data["params"]["precision"] == "fp32" and data["param"] == "tiny-fp32-bs32-gpu1"
    stats = data["stats"]
    assert stats["data"] == pytest.approx([0.01, 0.0125, 0.0075]) and stats["rounds"] == 3
    assert stats["iterations"] == 160
    assert stats["ops"] == pytest.approx(3 * 160 / (1.6 + 2.0 + 1.2))  # samples / seconds, pooled
    assert 1 / stats["median"] == pytest.approx(100.0)  # the median window
    assert data["extra_info"]["throughput"] == 100.0 and data["extra_info"]["samples_per_window"] == 160


def test_cases_without_windows_are_left_out():
    assert benchmark_json.to_benchmark(_record([], throughput=None), {}) is None
    error = _record([1.0], throughput=None, verdict="error")
    assert benchmark_json.to_benchmark(error, {}) is None


def test_machine_info_names_the_gpus_driver_and_cuda_libraries():
    env = {"gpus": environment.summarize_gpus([{"index": 0, "name": "NVIDIA H100 80GB HBM3"}] * 8, source="nvml",
                                              driver="550.54.15", cuda_driver="12.4"),
           "versions": {"torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5"}}
    assert benchmark_json.gpu_machine_info(env) == {
        "gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "gpu_driver": "550.54.15", "cuda_driver": "12.4",
        "gpu_reason": None, "torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5"}


def first_autosaved_run(shared_run):
    """A run against a baseline that writes --benchmark-json and is also the first of two autosaved runs in
    bench-storage (one session for both tests, not two)."""
    def setup(dlperf):
        dlperf.baseline([tiny_case(1.0)])

    return shared_run("benchmark-json: a baseline run, autosaved", *WITH_BENCHMARK, "--dlperf-baseline",
                      "baseline.json", "--dlperf-json", "results.json", "--benchmark-json", "out.json",
                      "--benchmark-autosave", "--benchmark-storage", "bench-storage", setup=setup, fast=False)


def test_benchmark_json_holds_the_windows_figures_and_machine(shared_run):
    session = first_autosaved_run(shared_run)
    session.result.assert_outcomes(passed=1)
    dlperf = session.tester
    record = dlperf.results()["cases"][0]
    out = dlperf.results("out.json")
    (bench,) = out["benchmarks"]
    assert bench["fullname"] == "dlperf::tiny-fp32-bs32-gpu1" and bench["group"] == "dlperf tiny (img/s)"
    windows = record["attempts"][-1]["runs"][0]["windows"]
    assert bench["stats"]["rounds"] == len(windows) == 2  # dlperf_repeats=2
    assert bench["stats"]["data"] == pytest.approx([w["seconds"] / w["samples"] for w in windows])
    assert bench["stats"]["iterations"] == 32 * 5
    info = bench["extra_info"]
    assert info["throughput"] == pytest.approx(record["throughput"]) and info["unit"] == "img/s"
    assert info["verdict"] == "improved" and info["baseline"]["throughput"] == 1.0
    assert (info["batch_size"], info["gpus"], info["settings"]) == (32, 1, {})
    assert bench["options"]["warmup_steps"] == 2 and bench["options"]["steps"] == 5
    env = environment.collect(dlperf.path)
    machine = out["machine_info"]
    assert machine["gpu_count"] == env["gpus"]["count"] and machine["gpu"] == env["gpus"]["model"]
    assert machine["gpu_driver"] == env["gpus"]["driver"] and machine["torch"] == env["versions"]["torch"]


def test_autosaved_runs_are_read_by_pytest_benchmark_compare(shared_run, dlperf):
    first = first_autosaved_run(shared_run)
    first.result.assert_outcomes(passed=1)
    storage = first.tester.path / "bench-storage"
    assert len(list(storage.glob("*/*.json"))) == 1
    result = run(dlperf, "--dlperf-model", "tiny", "--benchmark-autosave", "--benchmark-storage", str(storage))
    result.assert_outcomes(passed=1)
    saved = sorted(storage.glob("*/*.json"))
    assert [p.name[:4] for p in saved] == ["0001", "0002"]
    assert json.loads(saved[0].read_text())["benchmarks"][0]["extra_info"]["dlperf"] is True
    compare = subprocess.run([sys.executable, "-m", "pytest_benchmark", "--storage", str(storage), "compare",
                              "--columns", "median,ops,rounds"],
                             cwd=dlperf.path, capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    lines = compare.stdout.splitlines()
    assert any("benchmark 'dlperf tiny (img/s)': 2 tests" in line for line in lines), compare.stdout
    for stem in (p.stem for p in saved):
        assert any(line.startswith(f"tiny-fp32-bs32-gpu1 ({stem[:4]}") for line in lines), compare.stdout


def test_nothing_is_added_when_pytest_benchmark_is_off_or_not_asked(dlperf):
    result = run(dlperf, "--dlperf-model", "tiny", "--benchmark-disable", "--benchmark-json", "off.json")
    result.assert_outcomes(passed=1)
    assert not (dlperf.path / "off.json").exists()
    # Loaded and enabled, but no JSON, storage or comparison asked for: no second table.
    result = run(dlperf, "--dlperf-model", "tiny")
    result.assert_outcomes(passed=1)
    assert "benchmark 'dlperf" not in result.stdout.str()
