"""What one training step asks of the host: the aten operators it dispatches and the values it reads back.

On a GPU, a step whose host cannot issue its kernels as fast as the GPU runs them measures the host
(bert-base amp bs64 on an H200: 54% mean GPU utilization). Each operator costs the host its Python,
dispatcher and launch time whatever the tensors' sizes, and each value read back (``.item()``,
``bool(tensor)``) waits for the GPU to finish. So the count of both per step is the step's host work,
and a recipe change that raises it can be seen on a CPU, before any GPU runs it.

Algorithm (:func:`count_step`): run the step ``warm`` times untimed (the first step creates the
optimizer's and the scaler's state, and dispatches more), then once more inside a
``TorchDispatchMode`` (``torch.utils._python_dispatch``) that counts every operator reaching the
dispatcher from Python or autograd, after autocast: the backward's operators too, each once. What an
operator calls inside its kernel is not seen (the mode is off while it runs), so the count does not
depend on the CPU (oneDNN or not, AVX-512 or not) nor on the tensors' sizes (bert-base's count is the
same at hidden size 48 as at 96, batch 2 as batch 4; resnet50's at any image size): a test may count
a full-depth model at a small width and size. ``aten._local_scalar_dense`` is the read-back: it is
counted as an operator and, separately, as a synchronization.

:func:`gpu_recipe_optimizer` is the optimizer the worker makes for a GPU (AdamW fused; SGD as on a
CPU), made for CPU parameters, so that a CPU count includes the optimizer step a GPU runs, not the
CPU's per-parameter loop (which reads each parameter's step count back: 207 syncs a step for BERT).
Autocast's casts are the CPU's list, which is close to the GPU's but not the same: the count is a
guard against change, not the GPU's own figure.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .training import make_optimizer

__all__ = ["HostWork", "count_step", "gpu_recipe_optimizer"]

READ_BACK = torch.ops.aten._local_scalar_dense.default


@dataclass(frozen=True)
class HostWork:
    """One step's host work: ``ops`` operators dispatched, ``syncs`` of them values read back to the host."""

    ops: int
    syncs: int
    by_op: Mapping[str, int]

    def top(self, n: int = 8) -> str:
        """The ``n`` most frequent operators, ``name xcount`` joined by commas."""
        common = sorted(self.by_op.items(), key=lambda item: (-item[1], item[0]))[:n]
        return ", ".join(f"{name} x{count}" for name, count in common)


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def count_step(step: Callable[[], None], *, warm: int = 1) -> HostWork:
    """The host work of one call of ``step`` after ``warm`` uncounted calls (the module docstring)."""
    for _ in range(warm):
        step()
    counter = _Count()
    with counter:
        step()
    return HostWork(ops=sum(counter.ops.values()), syncs=counter.ops.get(str(READ_BACK.overloadpacket), 0),
                    by_op=dict(counter.ops))


def gpu_recipe_optimizer(kind: str, params) -> torch.optim.Optimizer:
    """``kind``'s optimizer as the worker makes it for a CUDA device (:func:`.training.make_optimizer`),
    for parameters on the CPU (torch's fused AdamW runs there too)."""
    return make_optimizer(kind, params, torch.device("cuda"))
