"""Telemetry and FLOPs/MFU end to end: real workers on the CPU, the JSON results, JUnit and the summary.

A CPU case samples the host only.  The GPU side is exercised with a model registered in
the inner session's conftest: imported in its workers, that conftest makes the sampler
watch "GPU 0" as a CUDA case would, through the real NVML (absent here) or a fake one.
"""

from __future__ import annotations

import json
import statistics
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_dlperf import jsonio
from pytest_dlperf.worker.flops import count_training_flops
from pytest_dlperf.models import get_model_spec
from tests.fixtures import nvml_works, tiny_case

NVML_LINE = "telemetry: GPU unavailable: NVML library not found (host metrics only)"

# ``gputiny`` is the tiny convnet, registered here so that its workers import this file.
AS_IF_ON_GPU = textwrap.dedent("""
    import os
    from pytest_dlperf import register_model
    from pytest_dlperf.models import get_model_spec

    TINY = get_model_spec("tiny")
    register_model("gputiny", task="image-classification", batch_size=32, defaults=dict(TINY.defaults),
                   factory=lambda settings: TINY.factory(settings))

    if os.environ.get("DLPERF_RUN_ID"):  # in a worker: sample GPU 0 as a CUDA case would
        from pytest_dlperf.worker import telemetry

        class AsIfOnGpu0(telemetry.Telemetry):
            def __init__(self, gpu_indices=None, interval=0.1):
                super().__init__([0], interval)

        telemetry.Telemetry = AsIfOnGpu0
""")

# A fake NVML whose GPU 0 is 30% busy; the other metrics are "not supported".
FAKE_NVML = textwrap.dedent("""
    if os.environ.get("DLPERF_RUN_ID"):
        import sys, types
        import pynvml as real

        def not_supported(*args):
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)

        fake = types.ModuleType("pynvml")
        fake.__dict__.update((k, v) for k, v in vars(real).items() if k.startswith(("NVMLError", "NVML_")))
        fake.nvmlInit = fake.nvmlShutdown = lambda: None
        fake.nvmlDeviceGetHandleByIndex = lambda index: index
        fake.nvmlDeviceGetName = lambda handle: "Fake GPU"
        fake.nvmlDeviceGetUtilizationRates = lambda handle: types.SimpleNamespace(gpu=30, memory=5)
        fake.nvmlDeviceGetMemoryInfo = fake.nvmlDeviceGetPowerUsage = not_supported
        fake.nvmlDeviceGetClockInfo = fake.nvmlDeviceGetTemperature = not_supported
        fake.nvmlDeviceGetCurrentClocksEventReasons = fake.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0
        sys.modules["pynvml"] = fake
""")


def _tiny_flops_per_sample() -> float:
    spec = get_model_spec("tiny")
    return count_training_flops(spec, spec.settings()).per_sample


def _properties(dlperf, name: str) -> dict[str, str]:
    cases = {tc.get("name"): tc for tc in ET.parse(dlperf.path / "junit.xml").iter("testcase")}
    return {p.get("name"): p.get("value") for p in cases[name].iter("property")}


def test_a_cpu_case_reports_host_telemetry_and_flops(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-json", "results.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    data = dlperf.results()
    jsonio.validate(data, "results")
    record = data["cases"][0]

    telemetry = record["telemetry"]
    assert telemetry["error"] is None and telemetry["samples"] >= 1
    assert telemetry["gpu"] == {"available": False, "reason": "no GPU requested", "devices": {}}
    host = telemetry["host"]
    assert host["cpu_percent"]["mean"] > 0 and host["process_cpu_percent"]["mean"] > 0
    assert host["rss_bytes"]["max"] > 10 * 2**20

    flops = record["flops"]
    assert flops["flops_per_sample"] == _tiny_flops_per_sample() == 8849280.0
    assert flops["tflops"] == pytest.approx(flops["flops_per_sample"] * record["throughput"] / 1e12, rel=1e-9)
    assert flops["peak_tflops"] is None and flops["mfu"] is None  # a CPU has no datasheet peak
    run = record["attempts"][0]["runs"][0]
    assert run["telemetry"] == telemetry
    median = statistics.median(w["throughput"] for w in run["windows"])
    assert run["flops"]["tflops"] == pytest.approx(flops["flops_per_sample"] * median / 1e12, rel=1e-9)

    props = _properties(dlperf, "tiny-fp32-bs32-gpu1")
    assert float(props["dlperf_tflops"]) == pytest.approx(flops["tflops"], rel=1e-5)
    assert float(props["dlperf_cpu_util_mean"]) == pytest.approx(host["cpu_percent"]["mean"], abs=0.01)
    assert "dlperf_mfu" not in props and "dlperf_gpu_util_mean" not in props

    result.stdout.re_match_lines([
        r"FLOPs and utilization \(over the measured windows",
        r"case +\| +TFLOP/s \| +MFU \| +GPU util mean / max \| +CPU util mean \| +RSS max$",
        r"tiny-fp32-bs32-gpu1 \| +[\d.e-]+ \| +- \| +- \| +\d+% \| +\d+ MiB$",
    ])
    assert "telemetry: GPU" not in result.stdout.str()  # a CPU case wants no GPU


def test_peak_tflops_gives_an_mfu_and_no_telemetry_turns_the_sampler_off(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "-o", "dlperf_peak_tflops=1.0", "-o", "dlperf_no_telemetry=true",
                        "--dlperf-json", "results.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    data = dlperf.results()
    jsonio.validate(data, "results")
    record = data["cases"][0]
    flops = record["flops"]
    assert flops["peak_tflops"] == 1.0
    assert flops["mfu"] == pytest.approx(flops["tflops"] / 1.0, rel=1e-12)
    assert record["parameters"]["peak_tflops"] == 1.0 and record["parameters"]["telemetry"] is False

    assert record["telemetry"] is None
    run = record["attempts"][0]["runs"][0]
    assert run["telemetry"] is None
    spec = json.loads((Path(run["log_dir"]) / "spec.json").read_text())
    assert spec["telemetry"] is False and spec["peak_tflops"] == 1.0
    worker = json.loads((Path(run["log_dir"]) / "result-rank0.json").read_text())
    assert "telemetry" not in worker and worker["flops"]["peak_tflops"] == 1.0

    props = _properties(dlperf, "tiny-fp32-bs32-gpu1")
    assert float(props["dlperf_mfu"]) == pytest.approx(flops["mfu"], rel=1e-5)
    assert "dlperf_cpu_util_mean" not in props and "dlperf_gpu_util_mean" not in props
    result.stdout.re_match_lines([r"tiny-fp32-bs32-gpu1 \| +[\d.e-]+ \| +[\d.]+% \| +- \| +- \| +-$"])

    result = dlperf.run("--dlperf-model", "tiny", "-o", "dlperf_peak_tflops=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*dlperf_peak_tflops: 0.0 is not allowed; expected a number greater than 0*"])


def test_gpu_telemetry_without_nvml_is_said_once_per_session(dlperf):
    if nvml_works():
        pytest.skip("NVML works on this machine")
    dlperf.pytester.makeconftest(AS_IF_ON_GPU)
    # Two cases, one of them on two ranks: every rank samples "its GPU" and finds no NVML.
    result = dlperf.run("--dlperf-model", "gputiny", "--dlperf-gpus", "1,2", "--dlperf-json", "results.json")
    result.assert_outcomes(passed=2)
    assert result.stdout.str().count(NVML_LINE) == 1
    result.stdout.fnmatch_lines(["*= dlperf summary =*", NVML_LINE])
    one, two = dlperf.results()["cases"]
    jsonio.validate(dlperf.results(), "results")
    unavailable = {"available": False, "reason": "unavailable: NVML library not found", "devices": {}}
    assert one["telemetry"]["gpu"] == unavailable and one["telemetry"]["host"]["rss_bytes"]["max"] > 0
    assert [(t["rank"], t["gpu"]) for t in two["telemetry"]] == [(0, unavailable), (1, unavailable)]
    assert all(t["host"]["cpu_percent"]["mean"] > 0 for t in two["telemetry"])
    run = two["attempts"][0]["runs"][0]
    assert [r["telemetry"]["gpu"] for r in run["ranks"]] == [unavailable, unavailable]
    # Global throughput of both ranks: the FLOPs count the whole job, MFU would divide by 2 peaks.
    assert two["flops"]["tflops"] == pytest.approx(two["flops"]["flops_per_sample"] * two["throughput"] / 1e12)


def test_min_gpu_utilization_from_the_command_line(dlperf):
    dlperf.pytester.makeconftest(AS_IF_ON_GPU + FAKE_NVML)
    result = dlperf.run("--dlperf-model", "gputiny", "-o", "dlperf_min_gpu_utilization=0.5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAIL gputiny-fp32-bs32-gpu1: GPU utilization 30.0% (mean over the measured windows) "
                                 "is below the minimum 50%*"])
    result = dlperf.run("--dlperf-model", "gputiny", "-o", "dlperf_min_gpu_utilization=1.5", fast=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: dlperf_min_gpu_utilization: 1.5 is not allowed; expected a number "
                                 "between 0 and 1"])


def test_min_gpu_utilization_gates_only_where_gpu_telemetry_exists(dlperf):
    dlperf.pytester.makeconftest(AS_IF_ON_GPU + FAKE_NVML)
    path = dlperf.baseline([
        tiny_case(1.0, min_gpu_utilization=0.8),  # CPU: not gated
        tiny_case(1.0, model="gputiny", min_gpu_utilization=0.8),  # fake GPU 30% busy: fails
        tiny_case(1.0, model="gputiny", batch_size=16),  # the defaults' 0.25: passes
    ], defaults={"min_gpu_utilization": 0.25})
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-json", "results.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "  FAIL gputiny-fp32-bs32-gpu1: GPU utilization 30.0% (mean over the measured windows) is below the minimum 80%",
        "      IMPROVED gputiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance 5%, 98% CI *)",
    ])
    result.stdout.re_match_lines([r"gputiny-fp32-bs32-gpu1 \| +[\d.e-]+ \| +- \| +30% / 30% \| +\d+% \| +\d+ MiB$"])
    by_id = {c["id"]: c for c in dlperf.results()["cases"]}
    cpu = by_id["tiny-fp32-bs32-gpu1"]
    assert cpu["verdict"] == "improved"
    assert "tiny-fp32-bs32-gpu1: min_gpu_utilization 80% not gated: GPU telemetry unavailable (no GPU requested)" \
        in cpu["message"]
    assert cpu["gpu_utilization_gate"] == {"minimum": 0.8, "measured": None, "rank": None, "status": "not gated"}
    low = by_id["gputiny-fp32-bs32-gpu1"]
    assert low["verdict"] == "fail" and low["throughput_verdict"] == "improved"
    assert low["gpu_utilization_gate"] == {"minimum": 0.8, "measured": 0.3, "rank": None, "status": "fail"}
    assert low["telemetry"]["gpu"]["devices"]["0"]["utilization_gpu"]["mean"] == 30
    ok = by_id["gputiny-fp32-bs16-gpu1"]
    assert ok["verdict"] == "improved" and ok["gpu_utilization_gate"]["status"] == "pass"
    assert float(_properties(dlperf, "gputiny-fp32-bs32-gpu1")["dlperf_gpu_util_mean"]) == 30.0
