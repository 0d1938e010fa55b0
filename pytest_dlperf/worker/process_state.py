"""What of a worker's process can change how fast its host side runs a step, snapshotted after its windows.

A run's worker starts either forked from the fork server or as a fresh interpreter (``start`` in its results,
docs/design.md).  Where a step waits on the host (a small batch on a fast GPU), anything that changes the host's
speed per step moves the figure, so :func:`snapshot` records what a start could change: the intra-op and inter-op
thread counts and the process's OS threads, its CPU affinity, nice value and scheduling policy, the garbage
collector's state (enabled, thresholds, frozen and tracked objects), the interpreter's flags, switch interval and
trace hooks, the signal mask and ignored signals, the resource limits, the backend flags torch's training reads
(cuDNN, TF32, matmul precision, determinism, grad mode), the import hooks and the modules that install hooks
(``torch._dynamo``, torchvision, pynvml), and the environment: the variables a process or its libraries read
(:data:`ENV_PREFIXES`, by value) and a digest of the rest.  Each rank writes it to ``process-rank{RANK}.json``
beside its result; :func:`differences` compares two, leaving out what is a process's own (:data:`OWN`).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import resource
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Variables kept by value: those a process, its C library, OpenMP, MKL, CUDA, PyTorch or Python read.
ENV_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "MALLOC_", "GLIBC_TUNABLES", "LD_", "CUDA_",
                "PYTORCH_", "TORCH_", "NCCL_", "PYTHON", "NVIDIA_", "CUBLAS", "CUDNN")
#: Variables a run gets its own value of (the fork server's ``LATE_VARIABLES``, and the controller's own pid).
PER_RUN = frozenset({"DLPERF_RUN_ID", "PWD", "OLDPWD", "HOME", "USERPROFILE", "PYTEST_CURRENT_TEST",
                     "PYTEST_DEBUG_TEMPROOT"})
#: Fields that are a process's own, whichever way it started: left out of :func:`differences`.
OWN = frozenset({"pid", "gc_tracked", "modules"})
#: Modules whose import changes what a step runs through (hooks, dispatch, a sampler), named when imported.
HOOKING = ("torch._dynamo", "torch._inductor", "torchvision", "pynvml", "torch.utils.flop_counter", "numpy",
           "transformers")
RLIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_MEMLOCK", "RLIMIT_NPROC")
FILE = "process-rank{rank}.json"


def environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The variables of :data:`ENV_PREFIXES` by value, and a digest of every other name and value but
    :data:`PER_RUN` (so that a difference shows without the environment's secrets in a file)."""
    kept = {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) and k not in PER_RUN}
    rest = sorted((k, v) for k, v in environ.items() if k not in kept and k not in PER_RUN)
    digest = hashlib.sha256(json.dumps(rest).encode()).hexdigest()[:16]
    return {"kept": kept, "others": [k for k, _ in rest], "others_digest": digest}


def _status_fields(*names: str) -> dict[str, str]:
    try:
        with open("/proc/self/status", encoding="utf-8") as handle:
            lines = dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
    except OSError:
        return {}
    return {name: lines.get(name, "").strip() for name in names}


def _torch_state() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    return {"num_threads": torch.get_num_threads(), "num_interop_threads": torch.get_num_interop_threads(),
            "cudnn_benchmark": torch.backends.cudnn.benchmark, "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "grad_enabled": torch.is_grad_enabled(), "anomaly": torch.is_anomaly_enabled(),
            "default_dtype": str(torch.get_default_dtype()),
            "cuda_initialized": torch.cuda.is_initialized()}


def snapshot() -> dict[str, Any]:
    """This process's state, as far as a start can change it (the module docstring lists it)."""
    status = _status_fields("SigBlk", "SigIgn", "Threads")
    return {
        "pid": os.getpid(),
        "torch": _torch_state(),
        "os_threads": int(status.get("Threads") or 0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "sched_policy": os.sched_getscheduler(0),
        "gc": {"enabled": gc.isenabled(), "thresholds": list(gc.get_threshold()), "frozen": gc.get_freeze_count()},
        "gc_tracked": len(gc.get_objects()),
        "flags": {name: getattr(sys.flags, name) for name in dir(sys.flags)
                  if not name.startswith(("_", "n_")) and isinstance(getattr(sys.flags, name), int)},
        "switch_interval": sys.getswitchinterval(),
        "recursion_limit": sys.getrecursionlimit(),
        "trace": sys.gettrace() is not None, "profile": sys.getprofile() is not None,
        "signals": {"blocked": status.get("SigBlk"), "ignored": status.get("SigIgn"),
                    "sigint": str(signal.getsignal(signal.SIGINT)), "sigterm": str(signal.getsignal(signal.SIGTERM))},
        "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS
                    if hasattr(resource, name)},
        "umask": _umask(),
        "meta_path": [type(finder).__name__ if not isinstance(finder, type) else finder.__name__
                      for finder in sys.meta_path],
        "hooking_modules": [name for name in HOOKING if name in sys.modules],
        "modules": len(sys.modules),
        "environment": environment(os.environ),
    }


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def differences(a: Mapping[str, Any], b: Mapping[str, Any], ignore: frozenset[str] = OWN) -> dict[str, tuple]:
    """``{field: (a's, b's)}`` for each top-level field of two snapshots that differs, but those in ``ignore``."""
    return {key: (a.get(key), b.get(key)) for key in sorted(set(a) | set(b))
            if key not in ignore and a.get(key) != b.get(key)}


def environment_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two snapshots' ``environment``: the variables kept by value whose values differ, those
    only one has, and whether the other variables' values differ (their digest)."""
    kept_a, kept_b = a.get("kept", {}), b.get("kept", {})
    out = [f"{name}: {kept_a.get(name)!r} / {kept_b.get(name)!r}" for name in sorted(set(kept_a) | set(kept_b))
           if kept_a.get(name) != kept_b.get(name)]
    out += [f"{name}: only in the {side}" for side, one, other in (("first", a, b), ("second", b, a))
            for name in sorted(set(one.get("others", ())) - set(other.get("others", ())))]
    if not out and a.get("others_digest") != b.get("others_digest"):
        out.append("the values of other variables")
    return out


def record(result_dir: str | None, rank: int) -> None:
    """Write this rank's snapshot beside its result (never fails the run: a snapshot is a diagnostic)."""
    if not result_dir:
        return
    try:
        Path(result_dir, FILE.format(rank=rank)).write_text(json.dumps(snapshot(), indent=1), encoding="utf-8")
    except (OSError, RuntimeError, ValueError):
        pass
