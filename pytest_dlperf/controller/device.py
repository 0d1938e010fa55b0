"""Where a session's cases run: ``--dlperf-device`` resolved against what torch sees, and the
warning before a case sized for a GPU trains on the CPU."""

from __future__ import annotations

import dataclasses

from .. import models
from ..cases import Case


@dataclasses.dataclass(frozen=True)
class DeviceChoice:
    """Where this session's cases run: ``--dlperf-device`` resolved against what torch sees."""

    kind: str  # "cuda" or "cpu"
    cuda_count: int  # visible CUDA devices (0 when not probed: --dlperf-device cpu)

    @classmethod
    def probe(cls, requested: str) -> DeviceChoice:
        if requested == "cpu":
            return cls("cpu", 0)
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return cls("cuda" if (requested == "cuda" or count) else "cpu", count)

    def shared(self, ranks: int, share: bool) -> int | None:
        """How many GPUs a case of ``ranks`` ranks shares under ``--dlperf-share-gpus`` (``share``): the visible
        ones where there are fewer than its ranks, else None (each rank has a GPU of its own, or none is shared)."""
        if not share or self.kind != "cuda" or ranks <= self.cuda_count:
            return None
        return self.cuda_count


#: FLOPs of one training step above which a case is too big for a CPU (a 2-core CPU trains
#: about 0.1 TFLOP/s: a step of this size takes about 2 seconds; resnet50 at batch 256 is 3 TFLOP).
CPU_STEP_FLOPS = 0.2e12


def gpu_sized_warning(case: Case, requested: str, device: str) -> str | None:
    """Before a GPU-sized case starts on the CPU because ``--dlperf-device auto`` found no GPU: why it may be slow.

    GPU-sized: one training step (all ranks) counts more than :data:`CPU_STEP_FLOPS`
    (counted on the meta device, as the worker's FLOP count; nothing is trained here).
    ``requested``: the ``--dlperf-device`` option; ``device``: what it resolved to.
    """
    if requested != "auto" or device != "cpu":
        return None
    try:
        from ..worker.flops import count_training_flops

        spec = models.get_model_spec(case.model)
        counted = count_training_flops(spec, spec.settings(case.settings_dict))
    except Exception:  # noqa: BLE001 - a model the counter cannot run: no estimate, no warning
        return None
    batch = case.batch_size if isinstance(case.batch_size, int) else spec.batch_size
    per_step = counted.per_batch / counted.per_batch_at * batch * case.gpus
    if per_step < CPU_STEP_FLOPS:
        return None
    return (f"dlperf: {case.id} is sized for a GPU ({per_step / 1e12:.1f} TFLOP a step) and trains on the CPU, "
            "because --dlperf-device auto found no GPU: expect minutes a step; --dlperf-device cuda requires "
            "a GPU, --dlperf-device cpu says the CPU is meant")

