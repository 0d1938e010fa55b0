"""What the GPU tests share: whether CUDA is here, the skip marks, NVML facts, probe models.

Nothing here creates a CUDA context in the test process: ``torch.cuda.is_available()`` and
``device_count()`` only initialise the driver, and GPU names and UUIDs come from NVML.  The
CUDA work happens in the workers the inner pytest sessions start, as in a real run.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest


@functools.cache
def cuda_count() -> int:
    """CUDA devices visible to this process (0 without CUDA, a driver or a CUDA build of torch)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup counts as none
        return 0


def requires_gpus(n: int = 1) -> pytest.MarkDecorator:
    """Skip unless ``n`` CUDA devices are visible, with the reason the plugin gives its own cases."""
    count = cuda_count()
    reason = "CUDA not available" if count == 0 else f"needs {n} GPUs, {count} visible"
    return pytest.mark.skipif(count < n, reason=reason)


requires_cuda = requires_gpus(1)

#: What every GPU test module starts with.
GPU_TEST = [pytest.mark.gpu_check, requires_cuda]


def nvml_devices() -> list[dict[str, Any]]:
    """Every GPU NVML sees, in NVML's (PCI bus) order: index, name, UUID and memory in use."""
    import pynvml as nvml

    nvml.nvmlInit()
    try:
        out = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            out.append({"index": index, "name": str(nvml.nvmlDeviceGetName(handle)),
                        "uuid": str(nvml.nvmlDeviceGetUUID(handle)),
                        "memory_used_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).used)})
        return out
    finally:
        nvml.nvmlShutdown()


def first_visible_nvml_device() -> dict[str, Any]:
    """The NVML device that CUDA device 0 is, read from ``CUDA_VISIBLE_DEVICES`` as CUDA reads it."""
    devices = nvml_devices()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return devices[0]
    first = visible.split(",")[0].strip()
    if first.isdigit():
        return devices[int(first)]
    return next(d for d in devices if d["uuid"].startswith(first))


def only_case(document: dict[str, Any]) -> dict[str, Any]:
    cases = document["cases"]
    assert len(cases) == 1, [c["id"] for c in cases]
    return cases[0]


def first_run(record: dict[str, Any]) -> dict[str, Any]:
    return record["attempts"][0]["runs"][0]


def files_under(folder: Path, pattern: str = "*") -> list[Path]:
    return sorted(p for p in folder.rglob(pattern) if p.is_file())
