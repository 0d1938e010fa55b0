"""The worker's side of a multi-rank case: ranks, the process group, DDP, gathering.

A worker learns its rank from whichever launcher started it:

* ``torchrun``: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (and ``MASTER_ADDR/PORT``);
* SLURM's ``srun``: ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``;
* OpenMPI's ``mpirun``: ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
  ``OMPI_COMM_WORLD_LOCAL_RANK``.

With more than one rank it joins a process group (NCCL on GPUs, gloo on CPUs, or the backend that
``dlperf_dist_backend`` names: :func:`choose_backend`) through
the ``env://`` rendezvous and trains a ``DistributedDataParallel`` model whose gradients are
views into its buckets (:meth:`ProcessGroup.wrap`).  Every rank times the same windows; rank 0 gathers them once at the end, so
gathering adds nothing to the measured time.

``--dlperf-share-gpus`` puts rank ``r`` on visible GPU ``r mod N`` (:func:`shared_index`), so that a
2-GPU case runs its whole multi-rank path (DDP on CUDA tensors, each rank's telemetry and logs, the
scaling figures) on the one GPU of a test machine. NCCL refuses two ranks on one device ("Duplicate GPU
detected"), so shared ranks meet over gloo, which all-reduces CUDA tensors through the host; the
throughput of such a case measures neither a GPU nor scaling, and its results say so.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from datetime import timedelta
from typing import Any

RANK_VARIABLES = (
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
)


@dataclasses.dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def ranks_from_env(env: dict[str, str] | None = None) -> Ranks:
    env = os.environ if env is None else env
    for rank_var, world_var, local_var in RANK_VARIABLES:
        if rank_var in env and world_var in env:
            rank = int(env[rank_var])
            return Ranks(rank, int(env[world_var]), int(env.get(local_var, rank)))
    return Ranks()


BACKENDS = ("auto", "nccl", "gloo")
#: The one backend of ranks that share a GPU.
SHARED_BACKEND = "gloo"


def shared_index(local_rank: int, visible: int) -> int:
    """The CUDA device of ``local_rank`` when the ranks share the ``visible`` GPUs: ``local_rank mod visible``."""
    if visible < 1:
        raise ValueError("--dlperf-share-gpus: no GPU is visible to share")
    return local_rank % visible


def choose_backend(device_type: str, requested: str = "auto", shared: bool = False) -> str:
    """The process group's backend: ``requested``, or for ``auto`` NCCL on CUDA and gloo elsewhere; gloo for ranks
    that share GPUs, where NCCL is refused in one line (it rejects two ranks on one device)."""
    if requested not in BACKENDS:
        raise ValueError(f"dlperf_dist_backend: {requested!r}; expected one of {', '.join(BACKENDS)}")
    if shared:
        if requested == "nccl":
            raise ValueError("--dlperf-share-gpus: ranks that share a GPU meet over gloo; NCCL refuses two ranks on "
                             "one device; expected dlperf_dist_backend gloo or auto")
        return SHARED_BACKEND
    if requested != "auto":
        return requested
    return "nccl" if device_type == "cuda" else "gloo"


class ProcessGroup:
    """The job's process group, from init to destroy."""

    def __init__(self, ranks: Ranks, device, timeout_seconds: float = 600.0, backend: str | None = None):
        import torch.distributed as dist

        self.ranks = ranks
        self.device = device
        self.backend = backend or choose_backend(device.type)
        # The launcher's variables name the rendezvous; env:// reads them as these.
        os.environ.setdefault("RANK", str(ranks.rank))
        os.environ.setdefault("WORLD_SIZE", str(ranks.world_size))
        kwargs: dict[str, Any] = {}
        if self.backend == "nccl":
            kwargs["device_id"] = device
        dist.init_process_group(self.backend, init_method="env://", rank=ranks.rank,
                                world_size=ranks.world_size, timeout=timedelta(seconds=timeout_seconds),
                                **kwargs)

    def wrap(self, model):
        """The model in DDP, its gradients views into DDP's buckets (``gradient_as_bucket_view``).

        With DDP's defaults every gradient is copied into its bucket before the all-reduce and back
        after it: hundreds of small copies per step for ResNet-50, which cost a one-rank job 7.5% of its
        throughput on an H200 (benchmarks/gpu_diagnose.py, benchmarks/gpu-runs/2026-11-26-h200) where
        the step synchronizes with the host (the GradScaler's inf check with a foreach optimizer, as in
        NVIDIA's recipe). Bucket views do the same arithmetic without the copies (torch's DDP notes
        recommend them). The buffers are still broadcast every forward, as NVIDIA's DDP runs do: that
        and the reducer's hooks are DDP's own cost, which a scaling efficiency over a plain 1-GPU
        process includes (:attr:`pytest_dlperf.results.case.Scaling.reference_kind`). On an H100
        (benchmarks/gpu-runs/2026-11-26-h100) one-rank DDP cost 5.3% with DDP's defaults: the broadcast
        3.4 points, the copies 0.5, the rest the hooks.
        """
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.backend == "nccl":
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.ranks.world_size
        dist.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        """Destroy the group, after every reference to the DDP model is dropped (the callers do so).
        A DDP model still alive at interpreter exit can make torch 2.14's gloo abort the process after
        all its work ("terminate called without an active exception", SIGABRT): a 2-rank DDP script
        did in 5 of 60 runs here, and in 0 of 40 once it deleted the model before destroying the group
        (gloo's threads meeting interpreter finalization: https://github.com/pytorch/pytorch/pull/179291).
        The cycle collector runs first, so that a model in a reference cycle goes too."""
        import gc

        import torch.distributed as dist

        gc.collect()
        if dist.is_initialized():
            dist.destroy_process_group()


def rank_identity(ranks: Ranks, device_info: dict[str, Any]) -> dict[str, Any]:
    return {"rank": ranks.rank, "local_rank": ranks.local_rank, "host": socket.gethostname(),
            "device": device_info}


def global_windows(per_rank: list[list[dict[str, Any]]], world_size: int) -> list[dict[str, Any]]:
    """Combine the ranks' windows: global samples over the slowest rank's seconds, with the slowest rank's phases
    (where it has them: :mod:`.phases`)."""
    combined = []
    for windows in zip(*per_rank):
        slowest = max(windows, key=lambda w: w["seconds"])
        seconds = slowest["seconds"]
        samples = sum(w["samples"] for w in windows)
        combined.append({"steps": windows[0]["steps"], "samples": samples, "seconds": seconds,
                         "throughput": samples / seconds})
        if "phases" in slowest:
            combined[-1]["phases"] = slowest["phases"]
    return combined
