"""Host-bound GPU cases: a case whose GPUs idle part of the time measures the host that feeds them.

Where a GPU finishes a step's kernels faster than the host's Python issues them, the step's time is the host's:
its figure depends on the host's CPU and does not carry to another machine with the same GPU, nor compare with
NVIDIA's figures.  So each GPU case's results carry (:func:`assess`):

* ``gpu_busy``: the lowest mean GPU utilization of its GPUs over the measured windows (NVML's busy time of the
  SMs, from the workers' telemetry), as a fraction;
* ``host_seconds_per_step``: the host's seconds to issue one step right after a synchronization (its runs' median,
  the worker's ``timing.host_seconds_per_step``: what ``benchmarks/gpu_diagnose.py`` measures), beside
  ``step_seconds``, a step's time in the windows;
* ``cpu``: the host's CPU model; ``threshold``; and ``bound``: ``gpu_busy`` below ``threshold``
  (``dlperf_host_bound_below``, :data:`HOST_BOUND_BELOW`).

A host-bound case says so in its verdict message (:meth:`HostBound.line`), the summary and the report, and its saved
baseline entry keeps the CPU (``host_cpu``), so that gating it on another CPU model is named (:func:`cpu_mismatch`),
as a GPU mismatch is.  A CPU case, or one without GPU telemetry, gets none of it (None).

Why 90%: the seeds' GPU-bound cases (resnet50, vgg16, gpt2) kept an H200 93-100% busy; bert-base amp bs64,
whose step the host sets, 54-74% (issue 42's runs).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


HOST_BOUND_BELOW = 0.9
#: The worker's ``timing`` key of the host's time to issue one step.
HOST_SECONDS = "host_seconds_per_step"


@dataclasses.dataclass(frozen=True)
class HostBound:
    """How busy a GPU case kept its GPUs, and what that says of its figure (the module docstring)."""

    gpu_busy: float
    threshold: float
    host_seconds_per_step: float | None = None
    step_seconds: float | None = None
    cpu: str | None = None

    @property
    def bound(self) -> bool:
        return self.gpu_busy < self.threshold

    def line(self) -> str:
        """The verdict message's line of a host-bound case."""
        issued = (f"; the host took {1000 * self.host_seconds_per_step:.1f} ms to issue a step of "
                  f"{1000 * self.step_seconds:.1f} ms" if self.host_seconds_per_step and self.step_seconds else "")
        return (f"host-bound: its GPU was busy {100 * self.gpu_busy:.0f}% of the measured windows (below "
                f"{100 * self.threshold:g}%, dlperf_host_bound_below): this figure depends on the host's CPU "
                f"({self.cpu or 'unknown model'}) as much as on the GPU{issued}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "bound": self.bound}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostBound:
        return cls(data["gpu_busy"], data["threshold"], data.get("host_seconds_per_step"), data.get("step_seconds"),
                   data.get("cpu"))


def assess(utils: Sequence[tuple[int | None, float, float]], timings: Iterable[Mapping[str, Any]],
           windows: Iterable[Mapping[str, Any]], threshold: float, cpu: str | None) -> HostBound | None:
    """A GPU case's :class:`HostBound` from the utilization of each GPU its telemetry sampled (``utils``: (rank,
    mean %, max %), :func:`pytest_dlperf.results.telemetry.gpu_utilizations`), its runs' ``timings`` and
    ``windows``; None where no GPU utilization was sampled (a CPU case, telemetry off, no NVML)."""
    if not utils:
        return None
    host = [t[HOST_SECONDS] for t in timings if t.get(HOST_SECONDS) is not None]
    steps = [w["seconds"] / w["steps"] for w in windows if w.get("steps")]
    return HostBound(min(mean for _, mean, _ in utils) / 100, threshold,
                     statistics.median(host) if host else None, statistics.median(steps) if steps else None, cpu)

