"""One real training step per precision: forward, loss, backward, optimizer step.

* ``fp32``: TF32 off for matmul and cuDNN (true FP32).
* ``tf32``: TF32 on for matmul and cuDNN (Ampere and newer; no effect on CPU).
* ``amp``: autocast to float16 and a ``GradScaler`` (init scale 128, as NVIDIA's recipe).
* ``bf16``: autocast to bfloat16, no scaler.

CNNs train in channels_last under ``amp`` and ``bf16`` unless the case's
``channels_last`` setting says otherwise; ``cudnn.benchmark`` is on.  Data is synthetic
by default: one batch made on the device once and reused every step (NVIDIA's
``--data-backend synthetic``).  With a ``source`` (:mod:`pytest_dlperf.data`), every step
fetches its batch from it, so the loader's time is part of the step.  A step never
synchronizes with the host by itself; timing code does.  Inside a measured window a step
marks the end of each of its phases on its :attr:`TrainingStep.clock` (:mod:`.phaseclock`).

The ``compile`` setting ``torch.compile``s the model (after the DDP wrapper, if any; in
``compile_mode``'s mode, e.g. ``reduce-overhead``: CUDA graphs): its
forward and backward run compiled; the loss and the optimizer step stay eager.  The
first call compiles; the worker runs it before the warm-up (``worker.compile_steps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..cases import Case
from ..models import ModelSpec
from . import phaseclock

AUTOCAST = {"amp": torch.float16, "bf16": torch.bfloat16}


def configure_backends(precision: str) -> None:
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def make_optimizer(kind: str, params, device: torch.device | None = None):
    """The model's optimizer; on CUDA AdamW is torch's fused kernel, as NVIDIA's FusedAdam is."""
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    if kind == "adamw":
        fused = device is not None and device.type == "cuda"
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=fused or None)
    raise ValueError(f"unknown optimizer {kind!r}")


def compile_settings(spec: ModelSpec, given: Mapping[str, Any], device_type: str) -> dict[str, Any]:
    """``compile`` and ``compile_mode`` of a case whose explicit settings are ``given``: as given, else the model's
    CUDA recipe on a GPU (:attr:`ModelSpec.cuda_compile`), else eager (``compile_mode`` only where it is one)."""
    if "compile" in given:
        mode = given.get("compile_mode")
        return {"compile": bool(given["compile"]), **({"compile_mode": mode} if mode else {})}
    if device_type == "cuda" and spec.cuda_compile is not None:
        return {"compile": True, "compile_mode": spec.cuda_compile}
    return {"compile": False}


def uses_channels_last(spec: ModelSpec, precision: str, settings: Mapping[str, Any]) -> bool:
    if "channels_last" in settings:
        return bool(settings["channels_last"])
    return spec.channels_last and precision in AUTOCAST


def _to_channels_last(batch):
    if isinstance(batch, torch.Tensor):
        return batch.contiguous(memory_format=torch.channels_last) if batch.dim() == 4 else batch
    if isinstance(batch, tuple | list):
        return type(batch)(_to_channels_last(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_channels_last(v) for k, v in batch.items()}
    return batch


def _unmarked() -> None:
    """A step's mark outside the measured windows: none."""


class TrainingStep:
    """Callable that runs one training step of ``case`` on ``device``."""

    def __init__(self, spec: ModelSpec, case: Case, settings: Mapping[str, Any],
                 device: torch.device, *, wrap=None, source=None):
        self.device = device
        self.precision = case.precision
        configure_backends(case.precision)
        self.channels_last = uses_channels_last(spec, case.precision, settings)
        model = spec.factory(settings).to(device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        model.train()
        self.model = wrap(model) if wrap else model
        self.clock = phaseclock.make(device)  # the phases of the steps in a window (time_windows)
        phaseclock.time_comm(self.model, self.clock)
        if settings.get("compile"):
            mode = settings.get("compile_mode")
            self.model = torch.compile(self.model, mode=None if mode in (None, "default") else mode)
        self.source = source  # None: the synthetic batch below, every step
        self.batch = None if source is not None else self._layout(spec.make_batch(case.batch_size, settings, device))
        self.loss_fn = spec.loss
        self.optimizer = make_optimizer(spec.optimizer, self.model.parameters(), device)
        self.dtype = AUTOCAST.get(case.precision)
        self.scaler = torch.amp.GradScaler(device.type, init_scale=128.0) if case.precision == "amp" else None
        self.last_loss: torch.Tensor | None = None

    def _layout(self, batch):
        return _to_channels_last(batch) if self.channels_last else batch

    def next_batch(self):
        """The synthetic batch, or the source's next one (fetched and copied to the device now)."""
        if self.source is None:
            return self.batch
        return self._layout(self.source.next())

    def __call__(self, mark=_unmarked) -> None:
        """One step; inside a measured window, ``mark`` (the :attr:`clock`'s) marks its start and the end of each
        phase: data, forward (the model and the loss), backward, optimizer (its step and ``zero_grad``)."""
        mark()
        batch = self.next_batch()
        mark()
        if self.dtype is not None:
            with torch.autocast(self.device.type, dtype=self.dtype):
                loss = self.loss_fn(self.model, batch)
        else:
            loss = self.loss_fn(self.model, batch)
        mark()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            mark()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            mark()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        mark()
        self.last_loss = loss.detach()

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def host_seconds(self, steps: int = 3) -> float:
        """The host's seconds to issue one step right after a synchronization (the median of ``steps``): its launch
        time, plus any wait a synchronization inside the step makes.  Near the step's time, the host sets the pace."""
        import statistics
        import time

        seconds = []
        for _ in range(steps):
            self.sync()
            start = time.perf_counter()
            self()
            seconds.append(time.perf_counter() - start)
        self.sync()
        return statistics.median(seconds)
