"""The environment on a GPU machine: GPU, driver, CUDA, cuDNN and NCCL filled in everywhere."""

from __future__ import annotations

import re

from .support import GPU_TEST, nvml_devices

pytestmark = GPU_TEST


def test_the_environment_names_the_gpu_driver_and_cuda_libraries(gpu):
    devices = nvml_devices()
    result = gpu.run("--dlperf-model", "tiny", "--dlperf-json", "results.json", "--dlperf-report", "report.md")
    result.assert_outcomes(passed=1)
    header = f"dlperf: {len(devices)} x {devices[0]['name']}*, driver * (CUDA *); torch *, CUDA *, cuDNN *; *"
    result.stdout.fnmatch_lines([header])
    env = gpu.results()["environment"]
    gpus, versions = env["gpus"], env["versions"]
    assert gpus["available"] is True and gpus["source"] == "nvml" and gpus["reason"] is None
    assert gpus["count"] == len(devices) and gpus["model"] == devices[0]["name"]
    assert [d["uuid"] for d in gpus["devices"]] == [d["uuid"] for d in devices]
    assert all(d["memory_bytes"] and d["compute_capability"] for d in gpus["devices"]), gpus["devices"]
    assert re.fullmatch(r"\d+\.\d+(\.\d+)*", gpus["driver"]) and versions["driver"] == gpus["driver"]
    assert re.fullmatch(r"\d+\.\d+", gpus["cuda_driver"])
    for name in ("cuda", "cudnn", "nccl"):
        assert re.fullmatch(r"\d+(\.\d+)+", versions[name] or ""), (name, versions[name])
    assert env["device"]["type"] == "cuda" and env["device"]["name"] == devices[0]["name"]
    assert env["topology"]["text"] or env["topology"]["reason"]

    report = (gpu.path / "report.md").read_text()
    section = report.split("## Environment", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", section, re.MULTILINE))
    assert rows["GPUs"] == f"{len(devices)} x {devices[0]['name']}"
    assert rows["NVIDIA driver / CUDA driver API"] == f"{gpus['driver']} / {gpus['cuda_driver']}"
    assert rows["CUDA (PyTorch build)"] == versions["cuda"]
    assert rows["cuDNN"] == versions["cudnn"] and rows["NCCL"] == versions["nccl"]
