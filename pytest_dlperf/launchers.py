"""Launchers: how a case's ranks are started (``--dlperf-launcher``).

``local`` (the default) runs a one-rank case as a single worker process and an N-rank
case with ``torch.distributed.run`` (torchrun) in standalone mode: N ranks on this node,
a rendezvous on a free port it picks itself, one rank per GPU (``LOCAL_RANK`` pins it),
NCCL on GPUs and gloo on CPUs.  Each rank's stdout and stderr go to their own files under
the run's folder (``ranks/<run>/attempt_0/<local rank>/stderr.log``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

WORKER = ["-m", "pytest_dlperf.worker"]
LAUNCHERS = ("local",)


@dataclasses.dataclass(frozen=True)
class Launch:
    """The command line (before the spec path) and extra environment of one run."""

    command: list[str]
    env: dict[str, str]
    distributed: bool


class LocalLauncher:
    name = "local"

    def reach(self, device: str, cuda_count: int) -> int | None:
        """How many ranks it can start: the visible GPUs, or any number of CPU ranks."""
        return cuda_count if device == "cuda" else None

    def launch(self, ranks: int, device: str, run_dir: Path, *, force_distributed: bool = False) -> Launch:
        if ranks == 1 and not force_distributed:
            return Launch([sys.executable, *WORKER], {}, distributed=False)
        env = {}
        if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            # Share the cores between the ranks rather than oversubscribe them.
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // ranks))
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                   f"--nproc-per-node={ranks}", f"--log-dir={run_dir / 'ranks'}", "--redirects=3",
                   "--monitor-interval=0.2", *WORKER]
        return Launch(command, env, distributed=True)


def get_launcher(name: str) -> LocalLauncher:
    if name == "local":
        return LocalLauncher()
    raise ValueError(f"unknown launcher {name!r}; expected one of {', '.join(LAUNCHERS)}")


def rank_stderr(run_dir: Path, local_rank: int) -> Path | None:
    """The stderr file torchrun's ``--redirects`` wrote for ``local_rank`` in this run."""
    found = sorted((run_dir / "ranks").glob(f"*/attempt_*/{local_rank}/stderr.log"))
    return found[-1] if found else None


_ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def failed_rank_from_agent(stderr_text: str) -> tuple[int, int] | None:
    """(rank, exit code) of the root cause that torchrun's agent reports, if it does."""
    marker = stderr_text.rfind("Root Cause")
    match = _ROOT_CAUSE.search(stderr_text, marker if marker >= 0 else 0)
    return (int(match.group(1)), int(match.group(2))) if match else None
