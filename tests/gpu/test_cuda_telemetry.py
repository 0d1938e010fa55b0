"""NVML telemetry is the GPU the rank trained on, whatever CUDA_VISIBLE_DEVICES says.

The worker samples the NVML device that its CUDA device is: without
``CUDA_VISIBLE_DEVICES`` the same index; with it, the entry at that index, a physical index
or a UUID.  Each case here trains ResNet-18 (AMP, batch 256) for a few seconds: the GPU it
ran on must show it, busy and with gigabytes in use, under that GPU's key and name.
"""

from __future__ import annotations

from .support import GPU_TEST, first_run, first_visible_nvml_device, nvml_devices, only_case, requires_gpus

pytestmark = GPU_TEST

BUSY = ("--dlperf-model", "resnet18", "--dlperf-precision", "amp", "--dlperf-batch-size", "256",
        "--dlperf-warmup-steps", "10", "--dlperf-steps", "40", "-o", "dlperf_repeats=3", "--dlperf-json", "results.json")


def rank_gpu(record: dict) -> tuple[str, dict]:
    """The one GPU the case's telemetry sampled: (its key, its summary)."""
    telemetry = record["telemetry"]
    assert telemetry["error"] is None and telemetry["gpu"]["available"] is True, telemetry["gpu"]
    devices = telemetry["gpu"]["devices"]
    assert len(devices) == 1, devices
    return next(iter(devices.items()))


def assert_busy(summary: dict, name: str) -> None:
    assert summary["name"] == name
    assert summary["memory_used_bytes"]["max"] > 2 * 2**30, summary  # ResNet-18 AMP bs256: several GB
    assert summary["utilization_gpu"]["mean"] > 50, summary
    assert summary["utilization_gpu"]["n"] >= 5, summary


def test_telemetry_samples_the_gpu_the_rank_ran_on(gpu):
    expected = first_visible_nvml_device()
    result = gpu.run(*BUSY)
    result.assert_outcomes(passed=1)
    record = only_case(gpu.results())
    key, summary = rank_gpu(record)
    assert first_run(record)["device"]["name"] == expected["name"]
    # Without CUDA_VISIBLE_DEVICES (or with "0" first) the key is the NVML index; with a UUID, the UUID.
    assert key in (str(expected["index"]), expected["uuid"]) or expected["uuid"].startswith(key), key
    assert_busy(summary, expected["name"])


def test_telemetry_follows_a_uuid_in_cuda_visible_devices(gpu, monkeypatch):
    device = nvml_devices()[-1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", device["uuid"])
    result = gpu.run_subprocess(*BUSY)
    result.assert_outcomes(passed=1)
    record = only_case(gpu.results())
    key, summary = rank_gpu(record)
    assert key == device["uuid"]
    assert first_run(record)["device"]["name"] == device["name"]
    assert_busy(summary, device["name"])


@requires_gpus(2)
def test_telemetry_follows_a_reordered_cuda_visible_devices(gpu, monkeypatch):
    devices = nvml_devices()
    order = [len(devices) - 1, *range(len(devices) - 1)]  # "N-1,0,1,...": CUDA device 0 is NVML device N-1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(map(str, order)))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA numbers as NVML does
    before = nvml_devices()
    result = gpu.run_subprocess(*BUSY)
    result.assert_outcomes(passed=1)
    record = only_case(gpu.results())
    key, summary = rank_gpu(record)
    target = devices[order[0]]
    assert key == str(target["index"])
    assert_busy(summary, target["name"])
    # The sampled memory is the trained GPU's: far above what that GPU held before the run.
    assert summary["memory_used_bytes"]["max"] > before[target["index"]]["memory_used_bytes"] + 2 * 2**30


@requires_gpus(2)
def test_each_rank_samples_its_own_gpu(gpu, monkeypatch):
    devices = nvml_devices()
    order = [1, 0, *range(2, len(devices))]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(map(str, order)))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    result = gpu.run_subprocess(*BUSY, "--dlperf-gpus", "2")
    result.assert_outcomes(passed=1)
    record = only_case(gpu.results())
    per_rank = {entry["rank"]: entry for entry in record["telemetry"]}
    assert sorted(per_rank) == [0, 1]
    for rank, physical in ((0, order[0]), (1, order[1])):
        devices_seen = per_rank[rank]["gpu"]["devices"]
        assert list(devices_seen) == [str(physical)], (rank, devices_seen)
        assert_busy(devices_seen[str(physical)], devices[physical]["name"])
