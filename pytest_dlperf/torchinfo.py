"""What the installed torch is (its version, CUDA, cuDNN and NCCL) and whether a GPU could be there, told
without importing torch where its files say it: a controller (the pytest process) never trains, and importing
torch costs a pytest session's start a second and a half (:mod:`pytest_dlperf.environment` asks here).

Read as files: torch's generated ``torch/version.py`` (``__version__``, ``cuda``, ``hip``), the versions of
NVIDIA's cuDNN and NCCL wheels of its CUDA major (what such a torch loads), and Linux's device files. Where the
files cannot say (a ROCm build, a torch built against the system's libraries), torch is imported and asked.
The wheels' versions are what torch reports: here (torch 2.14.1+cu130: cuDNN 9.24.0.43 and 9.24.0, NCCL 2.30.7),
and on the H100 image of 2026-11-26 (torch 2.11.0: nvidia-cudnn-cu13 9.19.0.56 and 9.19.0, nvidia-nccl-cu13
2.28.9 and 2.28.9; benchmarks/gpu-runs/2026-11-26-h100).
"""

from __future__ import annotations

import ast
import glob
import importlib.metadata
import importlib.util
import os
import sys
from typing import Any


def dist_version(name: str) -> str | None:
    """An installed distribution's version (its metadata), None where it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def format_cudnn(version: int | None) -> str | None:
    """cuDNN's integer version as text: 8907 -> "8.9.7" (cuDNN 8), 92400 -> "9.24.0" (cuDNN 9+)."""
    if not version:
        return None
    if version >= 90000:  # cuDNN 9 packs major * 10000 + minor * 100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def torch_build() -> dict[str, Any] | None:
    """The fields of torch's generated ``torch/version.py`` (``__version__``, ``cuda``, ``hip``, ...), read as
    text: torch is not imported.  None where torch is not installed as files."""
    try:
        spec = importlib.util.find_spec("torch")
        folder = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
        if folder is None:
            return None
        with open(os.path.join(folder, "version.py"), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, ValueError, SyntaxError, ImportError):
        return None
    fields: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(getattr(node, "value", None), ast.Constant):
            fields[target.id] = node.value.value
    return fields if "__version__" in fields else None


def _wheel_version(name: str) -> str | None:
    """The first three parts of an installed distribution's version ("9.24.0.43" -> "9.24.0"), else None."""
    version = dist_version(name)
    return None if version is None else ".".join(version.split(".")[:3])


def torch_versions_unimported() -> dict[str, str | None] | None:
    """:func:`torch_versions` without importing torch, where the files say it all: a CPU build (no CUDA, no
    ROCm: no cuDNN, no NCCL), or a CUDA wheel whose cuDNN and NCCL are NVIDIA's wheels of its CUDA major
    (``nvidia-cudnn-cu13``, ``nvidia-nccl-cu13``: the libraries such a torch loads).  None otherwise (a ROCm
    build, a torch built against the system's libraries): then torch is imported.  A controller saves the
    second and a half that importing torch costs; tests/test_environment.py checks both ways agree."""
    build = torch_build()
    if build is None or build.get("hip"):
        return None
    cuda = build.get("cuda")
    if not cuda:
        return {"cuda": None, "cudnn": None, "nccl": None}
    major = str(cuda).split(".")[0]
    cudnn, nccl = _wheel_version(f"nvidia-cudnn-cu{major}"), _wheel_version(f"nvidia-nccl-cu{major}")
    if cudnn is None or nccl is None:
        return None
    return {"cuda": str(cuda), "cudnn": cudnn, "nccl": nccl}


def torch_versions() -> dict[str, str | None]:
    """CUDA, cuDNN and NCCL versions as torch was built with them (no device needed); from torch's files
    where they tell (:func:`torch_versions_unimported`) and torch is not imported yet."""
    if "torch" not in sys.modules:
        known = torch_versions_unimported()
        if known is not None:
            return known
    return torch_versions_imported()


def torch_versions_imported() -> dict[str, str | None]:
    """:func:`torch_versions` as the imported torch reports them."""
    out: dict[str, str | None] = {"cuda": None, "cudnn": None, "nccl": None}
    try:
        import torch
    except ImportError:
        return out
    out["cuda"] = torch.version.cuda
    try:
        out["cudnn"] = format_cudnn(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001 - a build without cuDNN
        pass
    try:
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:  # noqa: BLE001 - a build without NCCL
        pass
    return out


def no_gpu_device_files() -> bool:
    """Linux without NVIDIA's device files (``/dev/nvidia0``, ...) and without ROCm's (``/dev/kfd``): no GPU
    torch could open, so none to ask torch for (and no second and a half spent importing it)."""
    return (sys.platform.startswith("linux") and not glob.glob("/dev/nvidia[0-9]*")
            and not os.path.exists("/dev/kfd"))
