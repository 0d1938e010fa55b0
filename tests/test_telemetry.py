"""Telemetry: real psutil sampling, real NVML (absent on a GPU-less machine), index mapping."""

from __future__ import annotations

import json
import logging
import time

import pytest

from pytest_dlperf.worker import telemetry
from pytest_dlperf.worker.telemetry import Telemetry, decode_clock_reasons, nvml_index
from tests.fixtures import nvml_works

HOST_METRICS = {"cpu_percent", "process_cpu_percent", "rss_bytes"}


def _busy(seconds: float) -> int:
    end, total = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        total += sum(range(1000))
    return total


def test_host_only_sampling_of_busy_work() -> None:
    sampler = Telemetry(gpu_indices=None, interval=0.05)
    sampler.start()
    assert sampler.running
    _busy(0.5)
    sampler.stop()
    assert not sampler.running
    summary = sampler.summary()
    json.dumps(summary, allow_nan=False)
    assert summary["error"] is None
    assert summary["samples"] >= 3  # ~10 expected; fewer on a loaded machine
    assert summary["interval"] == 0.05
    assert 0.45 < summary["duration"] < 3
    assert summary["gpu"] == {"available": False, "reason": "no GPU requested", "devices": {}}
    host = summary["host"]
    assert HOST_METRICS <= set(host)
    assert host["cpu_percent"]["mean"] > 0
    assert host["cpu_percent"]["max"] >= host["cpu_percent"]["mean"] * 0.99
    # One busy Python thread: up to about one core (less when other processes compete).
    assert 5 < host["process_cpu_percent"]["mean"] < 250
    assert host["rss_bytes"]["mean"] > 10 * 2**20
    for metric in host.values():
        assert metric["n"] >= 1 and metric["max"] >= 0


def test_without_nvml_the_gpu_part_is_unavailable_and_logged_once(monkeypatch, caplog) -> None:
    if nvml_works():
        pytest.skip("NVML works on this machine")
    monkeypatch.setattr(telemetry, "_warned_unavailable", False)
    caplog.set_level(logging.WARNING, logger="pytest_dlperf.worker.telemetry")
    summaries = []
    for _ in range(2):
        with Telemetry(gpu_indices=[0], interval=0.02) as sampler:
            time.sleep(0.1)
        summaries.append(sampler.summary())
    for summary in summaries:
        assert summary["gpu"] == {"available": False, "reason": "unavailable: NVML library not found",
                                  "devices": {}}
        assert summary["error"] is None
        assert summary["samples"] >= 1
        assert HOST_METRICS <= set(summary["host"])
        json.dumps(summary, allow_nan=False)
    messages = [r.getMessage() for r in caplog.records if r.name == "pytest_dlperf.worker.telemetry"]
    assert messages == ["GPU telemetry unavailable: NVML library not found; collecting host metrics only"]


def test_stop_is_prompt_with_a_long_interval() -> None:
    sampler = Telemetry(interval=5).start()
    time.sleep(0.05)
    began = time.perf_counter()
    sampler.stop()
    assert time.perf_counter() - began < 0.5
    summary = sampler.summary()
    assert summary["samples"] == 1  # the last sample, taken at stop()
    assert summary["duration"] < 0.5
    sampler.stop()  # idempotent


def test_one_span_per_sampler_and_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        Telemetry(interval=0)
    with Telemetry(interval=0.01) as sampler:
        with pytest.raises(RuntimeError, match="one span"):
            sampler.start()


def test_summary_before_start() -> None:
    summary = Telemetry([0]).summary()
    assert summary["samples"] == 0 and summary["host"] == {}
    assert summary["gpu"]["available"] is False


def test_nvml_index_maps_through_cuda_visible_devices(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml_index(0) == 0 and nvml_index(3) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert [nvml_index(0), nvml_index(1)] == [2, 3]
    with pytest.raises(ValueError, match="not visible"):
        nvml_index(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,-1,0")  # CUDA stops at the first invalid entry
    assert nvml_index(0) == 5
    with pytest.raises(ValueError):
        nvml_index(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8932f937-d72c,MIG-0a1b2c3d")
    assert [nvml_index(0), nvml_index(1)] == ["GPU-8932f937-d72c", "MIG-0a1b2c3d"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError):
        nvml_index(0)


@pytest.mark.parametrize(("mask", "names"), [
    (0, []),
    (0x1, ["idle"]),
    (0x4 | 0x2, ["applications_clocks", "sw_power_cap"]),
    (0x8 | 0x40 | 0x80, ["hw_slowdown", "hw_thermal", "hw_power_brake"]),
    (0x20 | 0x100, ["sw_thermal", "display_clocks"]),
    (0x4 | 1 << 40, ["sw_power_cap", "unknown_0x10000000000"]),
])
def test_decode_clock_reasons(mask: int, names: list[str]) -> None:
    assert decode_clock_reasons(mask) == names


def test_clock_reason_bits_match_pynvml() -> None:
    pynvml = pytest.importorskip("pynvml")
    expected = {
        "idle": "GpuIdle", "applications_clocks": "ApplicationsClocksSetting", "sw_power_cap": "SwPowerCap",
        "hw_slowdown": "HwSlowdown", "sync_boost": "SyncBoost", "sw_thermal": "SwThermalSlowdown",
        "hw_thermal": "HwThermalSlowdown", "hw_power_brake": "HwPowerBrakeSlowdown",
        "display_clocks": "DisplayClockSetting", "board_limit": "BoardLimit", "reliability": "Reliability",
    }
    for bit, name in telemetry.CLOCK_REASONS.items():
        assert getattr(pynvml, f"nvmlClocksThrottleReason{expected[name]}") == bit, name


def test_gpu_sampling_wherenvml_works() -> None:
    if not nvml_works():
        pytest.skip("no NVML on this machine")
    with Telemetry([0], interval=0.05) as sampler:
        time.sleep(0.3)
    summary = sampler.summary()
    json.dumps(summary, allow_nan=False)
    assert summary["error"] is None
    assert summary["gpu"]["available"] is True and summary["gpu"]["reason"] is None
    device = summary["gpu"]["devices"]["0"]
    assert device["name"]
    assert device["errors"] == {}
    measured = {"utilization_gpu", "memory_used_bytes", "power_w", "sm_clock_mhz", "temperature_c"}
    assert measured <= set(device) | set(device["unsupported"])
    assert set(device["throttle_reasons"]) == set(device["throttle_samples"])


def test_stop_after_a_thread_that_could_not_start_keeps_the_first_error(monkeypatch):
    """Under a memory cap a thread's stack may not fit: stop() must not hide that error behind its own."""
    import threading

    def no_stack(self):
        raise RuntimeError("can't start new thread")

    sampler = Telemetry(gpu_indices=None, interval=0.05)
    monkeypatch.setattr(threading.Thread, "start", no_stack)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        try:
            sampler.start()
        finally:
            sampler.stop()
