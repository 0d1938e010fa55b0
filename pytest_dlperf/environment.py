"""The environment a measurement was taken in: host, software versions, GPUs, topology, git.

:func:`collect` returns one JSON-serialisable dict (``docs/result-format.md``)::

    {"host": {"hostname", "os", "kernel", "cpu", "cpu_count", "cpu_cores", "memory_bytes"},
     "versions": {"python", "pytest", "pytest-dlperf", "torch", "torchvision", "transformers",
                  "dali", "nvidia-ml-py", "cuda", "cudnn", "nccl", "driver"},
     "gpus": {"available", "reason", "count", "model", "driver", "cuda_driver", "source",
              "visible", "devices": [{"index", "name", "memory_bytes", "uuid", ...}]},
     "topology": {"text", "reason"},          # nvidia-smi topo -m
     "git": {"commit", "short", "branch", "dirty", "root"} or None}

Nothing here raises or takes long: NVML that cannot start, a missing ``nvidia-smi`` or
``git`` leave a ``reason`` (or ``None``) instead, and every subprocess has a timeout.
GPUs come from NVML first (no CUDA context in the controller), from ``torch.cuda`` when
NVML is unavailable.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .torchinfo import dist_version, no_gpu_device_files, torch_versions

SUBPROCESS_TIMEOUT = 10.0  # seconds for nvidia-smi and each git command
DISTRIBUTIONS = ("pytest-dlperf", "torch", "torchvision", "transformers", "nvidia-ml-py", "pytest")
DALI_DIST = re.compile(r"nvidia-dali-cuda\d+")


# --------------------------------------------------------------------------- versions


def dali_distribution() -> tuple[str, str] | None:
    """(name, version) of the installed ``nvidia-dali-cudaXXX`` wheel, whichever CUDA flavour it is."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if DALI_DIST.fullmatch(name):
            return name, dist.version
    return None


def format_cuda_driver(version: int | None) -> str | None:
    """The CUDA version a driver supports, from NVML's integer: 12040 -> "12.4"."""
    if not version:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def software_versions() -> dict[str, str | None]:
    """Python, the packages that shape a measurement, and torch's CUDA libraries."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    versions.update({name: dist_version(name) for name in DISTRIBUTIONS})
    dali = dali_distribution()
    versions["dali"] = dali[1] if dali else None
    versions["dali_package"] = dali[0] if dali else None
    versions.update(torch_versions())
    return versions


# --------------------------------------------------------------------------- host


@functools.cache
def cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's fields, each at its first occurrence (the first processor's), read once; empty where it cannot
    be read (not Linux)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, sep, value = line.partition(":")
                if sep:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo ("AMD EPYC 7B13"), else what Python knows."""
    info = cpuinfo()
    return info["model name"] if "model name" in info else platform.processor() or platform.machine()


#: The CPU features that decide how fast training runs on a CPU, in /proc/cpuinfo's names: whether bf16 and
#: fp16 have arithmetic of their own (the same "AMD EPYC" VM ran tiny bf16 at 5,029 img/s on a host with
#: avx512_bf16 and at 534 on one with avx2 alone).
CPU_ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16")


def cpu_isa() -> str | None:
    """The :data:`CPU_ISA_FLAGS` this CPU has, space-separated in that order ("avx2 avx512f avx512_bf16"), from
    /proc/cpuinfo's flags; None where they cannot be read (not Linux)."""
    flags = cpuinfo().get("flags")
    if flags is None:
        return None
    present = set(flags.split())
    return " ".join(f for f in CPU_ISA_FLAGS if f in present) or "none"


def cpu_signature() -> str | None:
    """The CPU's family and model numbers from /proc/cpuinfo ("family 23 model 1"): what tells apart generations a
    VM names alike ("AMD EPYC" is Zen 1 at family 23 model 1 and Zen 3 at family 25 model 1); None where not
    given (not x86 Linux)."""
    info = cpuinfo()
    if "cpu family" not in info or "model" not in info:
        return None
    return f"family {info['cpu family']} model {info['model']}"


def os_name() -> str:
    """The distribution's pretty name ("Debian GNU/Linux 12 (bookworm)"), else Python's platform string."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME") or platform.platform()
    except OSError:
        return platform.platform()


def host_info() -> dict[str, Any]:
    """Hostname, OS, kernel, CPU model, logical CPUs, physical cores and memory."""
    import psutil

    return {
        "hostname": socket.gethostname(),
        "os": os_name(),
        "kernel": platform.release(),
        "cpu": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_signature": cpu_signature(),
        "cpu_count": os.cpu_count(),
        "cpu_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
    }


# --------------------------------------------------------------------------- GPUs


def summarize_gpus(devices: list[dict[str, Any]], *, source: str | None, driver: str | None = None,
                   cuda_driver: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """The ``gpus`` section from a device list: count, one model name (or "A + B" when mixed)."""
    names = Counter(d.get("name") for d in devices if d.get("name"))
    model = " + ".join(names) if names else None
    return {"available": bool(devices), "reason": None if devices else (reason or "no GPU found"),
            "count": len(devices), "model": model, "driver": driver, "cuda_driver": cuda_driver,
            "source": source, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "devices": devices}


def _nvml_device(nvml: Any, index: int) -> dict[str, Any]:
    """Name, memory, UUID, compute capability, enforced power limit and highest SM clock of NVML device ``index``
    (the last two tell apart boards of one name); a field NVML refuses is None."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def read(fn, *args):
        try:
            return fn(handle, *args)
        except nvml.NVMLError:
            return None

    memory = read(nvml.nvmlDeviceGetMemoryInfo)
    capability = read(nvml.nvmlDeviceGetCudaComputeCapability)
    power = read(nvml.nvmlDeviceGetEnforcedPowerLimit)  # milliwatts
    return {"index": index, "name": read(nvml.nvmlDeviceGetName),
            "memory_bytes": int(memory.total) if memory is not None else None,
            "uuid": read(nvml.nvmlDeviceGetUUID),
            "compute_capability": ".".join(map(str, capability)) if capability else None,
            "power_limit_w": round(power / 1000) if power else None,
            "max_sm_clock_mhz": read(nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM)}


def nvml_gpus() -> dict[str, Any]:
    """Every GPU NVML sees (all of them, whatever ``CUDA_VISIBLE_DEVICES`` says), with the driver."""
    try:
        import pynvml as nvml
    except ImportError:
        return summarize_gpus([], source=None, reason="pynvml (nvidia-ml-py) is not installed")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        from .worker.telemetry import unavailable_reason

        return summarize_gpus([], source=None, reason=unavailable_reason(nvml, exc).removeprefix("unavailable: "))
    try:
        devices = [_nvml_device(nvml, i) for i in range(nvml.nvmlDeviceGetCount())]
        driver = nvml.nvmlSystemGetDriverVersion()
        try:
            cuda_driver = format_cuda_driver(nvml.nvmlSystemGetCudaDriverVersion_v2())
        except nvml.NVMLError:
            cuda_driver = None
        return summarize_gpus(devices, source="nvml", driver=driver, cuda_driver=cuda_driver)
    except nvml.NVMLError as exc:
        return summarize_gpus([], source=None, reason=f"NVML error: {exc}")
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def torch_gpus(reason: str | None) -> dict[str, Any] | None:
    """The visible CUDA devices through torch, when NVML gave none; None when torch sees none either."""
    if "torch" not in sys.modules and no_gpu_device_files():
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        devices = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append({"index": index, "name": props.name, "memory_bytes": int(props.total_memory),
                            "compute_capability": f"{props.major}.{props.minor}"})
    except Exception:  # noqa: BLE001 - a broken CUDA setup is reported as "no GPU"
        return None
    gpus = summarize_gpus(devices, source="torch")
    gpus["nvml_reason"] = reason
    return gpus


def gpu_info() -> dict[str, Any]:
    """NVML's view of the GPUs, else torch.cuda's; with the reason when there are none."""
    gpus = nvml_gpus()
    if gpus["count"]:
        return gpus
    return torch_gpus(gpus["reason"]) or gpus


def topology() -> dict[str, str | None]:
    """``nvidia-smi topo -m`` (the GPU/NIC interconnect matrix), or why it is missing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"text": None, "reason": "nvidia-smi not found"}
    try:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"text": None, "reason": f"nvidia-smi topo -m timed out after {SUBPROCESS_TIMEOUT:g} s"}
    except OSError as exc:
        return {"text": None, "reason": f"nvidia-smi: {exc}"}
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[0]
        return {"text": None, "reason": f"nvidia-smi topo -m exited with {done.returncode}: {first}"}
    return {"text": strip_ansi(done.stdout).rstrip(), "reason": None}


#: Terminal escape sequences (colours, underline): nvidia-smi topo -m underlines its legend with
#: ``ESC[4m`` ... ``ESC[0m`` even when its output is a pipe.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (for files and reports, which show them as ``\\u001b[4m``)."""
    return _ANSI.sub("", text)


# --------------------------------------------------------------------------- git


def _git(root: str, *args: str) -> str | None:
    """One git command's stripped stdout, or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


#: Where a commit is named explicitly, in the order they win: the plugin's own variable, then the
#: variables of the common CI systems (commit, branch). An explicit commit wins over git's.
COMMIT_VARIABLES = (
    ("DLPERF_GIT_COMMIT", "DLPERF_GIT_BRANCH"),
    ("GITHUB_SHA", "GITHUB_REF_NAME"),  # GitHub Actions
    ("CI_COMMIT_SHA", "CI_COMMIT_REF_NAME"),  # GitLab CI
    ("BUILDKITE_COMMIT", "BUILDKITE_BRANCH"),  # Buildkite
    ("GIT_COMMIT", "GIT_BRANCH"),  # Jenkins (its git plugin)
)


def given_commit(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The commit a variable of :data:`COMMIT_VARIABLES` names (the first that holds a commit hash), or None."""
    env = os.environ if env is None else env
    for commit_var, branch_var in COMMIT_VARIABLES:
        given = env.get(commit_var, "").strip()
        if re.fullmatch(r"[0-9a-fA-F]{7,64}", given):
            branch = (env.get(branch_var) or "").strip().removeprefix("origin/") or None
            return {"commit": given, "short": given[:10], "branch": branch, "dirty": False, "root": None}
    return None


def git_info(root: str | os.PathLike | None) -> dict[str, Any] | None:
    """The commit of the code under test.

    An explicit commit wins (:data:`COMMIT_VARIABLES`: ``DLPERF_GIT_COMMIT``, then GitHub Actions',
    GitLab CI's, Buildkite's and Jenkins' variables); else HEAD of the git checkout that holds
    ``root`` (pytest's rootdir), where git tracks files under ``root``: a copy of the code placed
    inside another repository (untracked there, or ignored) is not that repository's commit.
    None when nothing names a commit, or git is not installed.  ``dirty``: tracked files differ
    from HEAD (untracked files do not count).
    """
    given = given_commit()
    if given is not None:
        if root is not None and _git(os.fspath(root), "rev-parse", "--verify", "HEAD") == given["commit"]:
            given["root"] = _git(os.fspath(root), "rev-parse", "--show-toplevel")
        return given
    if root is None:
        return None
    root = os.fspath(root)
    commit = _git(root, "rev-parse", "--verify", "HEAD")
    if not commit or not _git(root, "ls-files", "--", "."):
        return None  # no checkout, or one that holds root without tracking it (a copy inside another repository)
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    return {"commit": commit, "short": commit[:10], "branch": None if branch in (None, "HEAD") else branch,
            "dirty": bool(status), "root": _git(root, "rev-parse", "--show-toplevel")}


# --------------------------------------------------------------------------- all of it


@functools.cache
def _collect(root: str | None) -> dict[str, Any]:
    gpus = gpu_info()
    versions = software_versions()
    versions["driver"] = gpus["driver"]
    return {"host": host_info(), "versions": versions, "gpus": gpus, "topology": topology(),
            "git": git_info(root)}


def collect(root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Host, versions, GPUs, topology and the git commit of ``root`` (pytest's rootdir).

    Collected once per process and root (a fresh copy each call, so callers may add keys).
    """
    return copy.deepcopy(_collect(None if root is None else os.fspath(root)))


def clear_cache() -> None:
    """Forget what :func:`collect` found (tests; a long-lived process whose machine changed)."""
    _collect.cache_clear()
