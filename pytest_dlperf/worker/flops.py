"""FLOPs of one training step, achieved TFLOP/s and model FLOPs utilization (MFU).

**Counting.** :func:`count_training_flops` runs one forward pass, the loss and the
backward pass of a registered model under ``torch.utils.flop_counter.FlopCounterMode``,
once per case.  FlopCounterMode counts the matrix arithmetic (matmuls, convolutions,
attention) at 2 FLOPs per multiply-add and nothing else: batch norm, activations, the
loss's softmax and the optimizer step are not counted, the usual convention for MFU.
The optimizer step is not run at all (its FLOPs are a few per parameter, negligible
next to the forward and backward passes, and FlopCounterMode would not count them).

The count is taken at a small batch (:data:`COUNT_BATCH`, 2: batch norm in training mode
needs more than one value per channel) and divided by the units of throughput in that
batch, ``spec.samples_per_batch(batch, settings)``: an image or a sequence, or a token
for a ``tokens/s`` model, so that ``flops per unit x throughput = FLOP/s`` at any batch.
That holds because a step's FLOPs grow linearly with the batch for these models.  The
count is the same at every precision: autocast changes the dtype, not the arithmetic.

It runs on the ``meta`` device, where tensors have shapes but no storage, so ResNet-50
at 224x224 is counted in a fraction of a second without allocating its activations.  A
model or batch that cannot be built on ``meta`` (a factory that loads weights, a batch
that reads a tensor's value) is counted on the CPU instead, at the same small batch.

**Peaks.** :data:`PEAKS` holds dense (not sparse) peak TFLOP/s per device and precision
from NVIDIA's datasheets and whitepapers; :func:`peak_tflops` finds a device by the name
``torch.cuda.get_device_name()`` gives it.  ``fp32`` is the CUDA cores' FP32 rate (no
tensor cores); ``tf32``, ``amp`` (FP16 with FP32 accumulation, as autocast runs it) and
``bf16`` are tensor-core rates, ``None`` where the device has no tensor cores for them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ..cases import PRECISIONS
from ..models import ModelSpec

COUNT_BATCH = 2


@dataclasses.dataclass(frozen=True)
class FlopCount:
    """The FLOPs of one training step (forward, loss and backward) of a model.

    ``per_sample`` is per unit of the model's throughput (image, sequence or token, as
    ``ModelSpec.unit`` says); ``per_batch`` is the whole step at ``per_batch_at`` samples,
    the batch it was counted at; ``by_module`` splits ``per_sample`` over the model's
    direct children (``{"conv1": ..., "layer1": ..., "fc": ...}``); ``device`` is where
    it was counted (``"meta"`` or ``"cpu"``).
    """

    per_sample: float
    per_batch: float
    per_batch_at: int
    by_module: dict[str, float]
    device: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def count_training_flops(spec: ModelSpec, settings: Mapping[str, Any],
                         batch_size: int = COUNT_BATCH) -> FlopCount:
    """Count one training step of ``spec`` with ``settings`` at ``batch_size`` samples.

    ``settings`` are the effective settings (``spec.settings(case_settings)``).  Counted
    on the ``meta`` device, or on the CPU where ``meta`` fails.
    """
    try:
        return _count(spec, settings, batch_size, "meta")
    except Exception:  # noqa: BLE001 - anything the model or its batch cannot do on meta
        return _count(spec, settings, batch_size, "cpu")


def _count(spec: ModelSpec, settings: Mapping[str, Any], batch_size: int, device_type: str) -> FlopCount:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    device = torch.device(device_type)
    counter = FlopCounterMode(display=False)
    with device:  # the factory's parameters and any tensor the forward creates land here
        model = spec.factory(settings)
        model.train()
        batch = spec.make_batch(batch_size, settings, device)
        with counter:
            spec.loss(model, batch).backward()
    units = spec.samples_per_batch(batch_size, settings)
    total = float(counter.get_total_flops())
    by_module = {
        name.split(".", 1)[1]: sum(ops.values()) / units
        for name, ops in counter.get_flop_counts().items()
        if name.count(".") == 1
    }
    return FlopCount(per_sample=total / units, per_batch=total, per_batch_at=batch_size,
                     by_module=by_module, device=device_type)


def achieved_tflops(flops_per_sample: float, throughput: float) -> float:
    """TFLOP/s of a run: FLOPs per unit of throughput times units per second."""
    return flops_per_sample * throughput / 1e12


@dataclasses.dataclass(frozen=True)
class DevicePeak:
    """Dense peak TFLOP/s of one device per precision; ``None``: no tensor cores for it.

    ``pattern`` is a regular expression searched (ignoring case) in the device's name;
    ``example`` is a name ``torch.cuda.get_device_name()`` returns for it.
    """

    pattern: str
    example: str
    fp32: float
    tf32: float | None
    amp: float | None
    bf16: float | None
    source: str


# Most specific first: the first row whose pattern is found in the name wins.  Where a
# datasheet lists tensor-core rates "with sparsity" only, the dense rate is half of it.
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak(r"\bH200 NVL\b", "NVIDIA H200 NVL", 60, 417.5, 835.5, 835.5,
               "NVIDIA H200 datasheet, H200 NVL column (TF32 835, FP16/BF16 1671 with sparsity)"),
    DevicePeak(r"\bH200\b", "NVIDIA H200", 67, 494.5, 989.5, 989.5,
               "NVIDIA H200 datasheet, H200 SXM column (TF32 989, FP16/BF16 1979 with sparsity)"),
    DevicePeak(r"\bGH200\b", "NVIDIA GH200 480GB", 67, 494.5, 989.5, 989.5,
               "NVIDIA GH200 Grace Hopper Superchip datasheet (TF32 989, FP16/BF16 1979 with sparsity)"),
    DevicePeak(r"\bH100 NVL\b", "NVIDIA H100 NVL", 60, 417.5, 835.5, 835.5,
               "NVIDIA H100 datasheet, H100 NVL column (TF32 835, FP16/BF16 1671 with sparsity)"),
    DevicePeak(r"\bH100 PCIe\b", "NVIDIA H100 PCIe", 51, 378, 756.5, 756.5,
               "NVIDIA H100 PCIe datasheet (TF32 756, FP16/BF16 1513 with sparsity)"),
    DevicePeak(r"\bH100\b.*\bHBM3\b|\bH100 SXM", "NVIDIA H100 80GB HBM3", 67, 494.5, 989.5, 989.5,
               "NVIDIA H100 datasheet, H100 SXM column (TF32 989, FP16/BF16 1979 with sparsity)"),
    DevicePeak(r"\bA100\b", "NVIDIA A100-SXM4-40GB", 19.5, 156, 312, 312,
               "NVIDIA A100 datasheet: the same for SXM4 and PCIe, 40GB and 80GB"),
    DevicePeak(r"\bA40\b", "NVIDIA A40", 37.4, 74.8, 149.7, 149.7, "NVIDIA A40 datasheet"),
    DevicePeak(r"\bA30\b", "NVIDIA A30", 10.3, 82, 165, 165, "NVIDIA A30 datasheet"),
    DevicePeak(r"\bA10\b", "NVIDIA A10", 31.2, 62.5, 125, 125, "NVIDIA A10 datasheet"),
    DevicePeak(r"\bL40S\b", "NVIDIA L40S", 91.6, 183, 362.05, 362.05, "NVIDIA L40S datasheet"),
    DevicePeak(r"\bL40\b", "NVIDIA L40", 90.5, 90.5, 181.05, 181.05, "NVIDIA L40 datasheet"),
    DevicePeak(r"\bL4\b", "NVIDIA L4", 30.3, 60, 121, 121, "NVIDIA L4 datasheet"),
    DevicePeak(r"\bV100S-PCIE\b", "Tesla V100S-PCIE-32GB", 16.4, None, 130, None,
               "NVIDIA V100 datasheet, V100S PCIe column (tensor 130)"),
    DevicePeak(r"\bV100-SXM2\b", "Tesla V100-SXM2-32GB", 15.7, None, 125, None,
               "NVIDIA V100 datasheet, V100 SXM2 column (tensor 125)"),
    DevicePeak(r"\bV100-PCIE\b", "Tesla V100-PCIE-16GB", 14, None, 112, None,
               "NVIDIA V100 datasheet, V100 PCIe column (tensor 112)"),
    DevicePeak(r"\bT4\b", "Tesla T4", 8.1, None, 65, None, "NVIDIA T4 datasheet (mixed FP16/FP32 65)"),
    DevicePeak(r"RTX 4090$", "NVIDIA GeForce RTX 4090", 82.6, 82.6, 165.2, 165.2,
               "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 (FP16 with FP32 accumulate)"),
    DevicePeak(r"RTX 3090$", "NVIDIA GeForce RTX 3090", 35.6, 35.6, 71, 71,
               "NVIDIA Ampere GA102 whitepaper, RTX 3090 (FP16 with FP32 accumulate)"),
)

_MIG = re.compile(r"\bMIG\b")


def device_peak(name: str | None) -> DevicePeak | None:
    """The :data:`PEAKS` row of the device called ``name``; ``None`` if unknown.

    ``None`` (not a GPU) and MIG slices, which have a fraction of the GPU's peak, are unknown.
    """
    if name is None or _MIG.search(name):
        return None
    return next((row for row in PEAKS if re.search(row.pattern, name, re.IGNORECASE)), None)


def peak_tflops(name: str | None, precision: str, override: float | None = None) -> float | None:
    """Dense peak TFLOP/s of the device called ``name`` at ``precision``.

    ``override`` (the user's ``dlperf_peak_tflops``) wins over the table, for any
    device, the CPU included; otherwise an unknown device, or a precision the device has
    no tensor cores for, gives ``None``.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    if override is not None:
        if override <= 0:
            raise ValueError(f"the peak TFLOP/s must be positive, not {override}")
        return float(override)
    row = device_peak(name)
    return None if row is None else getattr(row, precision)


def mfu(achieved: float, peak: float | None, devices: int = 1) -> float | None:
    """Model FLOPs utilization: ``achieved`` TFLOP/s of ``devices`` devices over their peak.

    ``peak`` is one device's; ``None`` when the peak is unknown.
    """
    if peak is None:
        return None
    return achieved / (peak * devices)
