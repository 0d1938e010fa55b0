"""The environment a measurement was taken in: host, software versions, device."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
from typing import Any

VERSIONED = ("pytest-dlperf", "torch", "torchvision", "transformers", "nvidia-dali-cuda120",
             "nvidia-dali-cuda130", "nvidia-ml-py", "pytest")


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torch_versions() -> dict[str, str | None]:
    """CUDA, cuDNN and NCCL versions as torch was built with them (no device needed)."""
    out: dict[str, str | None] = {"cuda": None, "cudnn": None, "nccl": None}
    try:
        import torch
    except ImportError:
        return out
    out["cuda"] = torch.version.cuda
    try:
        cudnn = torch.backends.cudnn.version()
        out["cudnn"] = str(cudnn) if cudnn else None
    except Exception:  # noqa: BLE001 - a build without cuDNN
        pass
    try:
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:  # noqa: BLE001 - a build without NCCL
        pass
    return out


@functools.cache
def collect() -> dict[str, Any]:
    """Host and software facts of this process's machine (the controller's)."""
    try:
        import psutil

        memory = psutil.virtual_memory().total
    except ImportError:  # pragma: no cover - psutil is a dependency
        memory = None
    versions = {name: _dist_version(name) for name in VERSIONED}
    versions["python"] = platform.python_version()
    versions.update(torch_versions())
    return {
        "host": {
            "hostname": socket.gethostname(),
            "os": platform.platform(),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "memory_bytes": memory,
        },
        "versions": versions,
    }


def header_line(env: dict[str, Any]) -> str:
    v = env["versions"]
    parts = [f"torch {v.get('torch')}"]
    if v.get("torchvision"):
        parts.append(f"torchvision {v['torchvision']}")
    parts.append(f"CUDA {v['cuda']}" if v.get("cuda") else "CPU-only torch")
    parts.append(f"{env['host']['cpu']} x{env['host']['cpu_count']}")
    return ", ".join(parts)
