"""The controller's watch on a run's pace: a run far slower than its baseline allows is cut short.

The rule is :mod:`pytest_dlperf.gate.far`'s.  :class:`PaceWatch` is called with the run's last progress about once a
second (:func:`pytest_dlperf.launch.process.run_command`).  It keeps the run's first report after its first step as
the start of its pace, and the machine's CPU times then; once the pace since is far under the floor for long enough,
it measures what else used the machine meanwhile, from outside the run:

* the machine's busy CPU time (psutil's ``cpu_times``: all but idle, disk wait, steal and interrupts) less the CPU
  time of the run's own processes: the process it started, its process group, every process tagged with its run id,
  and every process descending from them, whatever their environment (a model's own helpers are its load), and of
  the kernel's threads (what the run made the kernel do is never a neighbour's);
* the CPUs' wait on disks (a cold file cache is the machine's) and the hypervisor's steal;
* on a GPU, the processes NVML lists on the machine's GPUs that are not the run's.

Where any of them is over its limit, or cannot be told (no NVML on a GPU run), the run goes on and is judged as ever.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import psutil

from ..gate import far as far_mod
from ..gate.far import Cut, FarRule
from ..protocol import Progress
from ..worker.interference import cpu_seconds, cpu_since, kernel_threads, machine_times
from .process import group_members, tagged_processes


@dataclasses.dataclass(frozen=True)
class HostSample:
    """The machine's CPU times (busy, disk wait, steal) and its run's processes' and the kernel threads' CPU seconds
    by pid, at ``at``."""

    at: float
    busy: float
    iowait: float
    steal: float
    own: dict[int, float]

    @classmethod
    def take(cls, pid: int, run_id: str, clock: Callable[[], float] = time.monotonic) -> HostSample:
        return cls(clock(), *machine_times(), cpu_seconds(own_processes(pid, run_id) + kernel_threads()))


def own_processes(pid: int, run_id: str) -> list[psutil.Process]:
    """The run's processes: the one it started, its group, those tagged with its id, and their descendants."""
    found: dict[int, psutil.Process] = {}
    for root in {pid, *group_members(pid), *tagged_processes(run_id)}:
        try:
            proc = psutil.Process(root)
            found[root] = proc
            found.update((child.pid, child) for child in proc.children(recursive=True))
        except (psutil.Error, OSError):
            continue
    return list(found.values())


def others_percent(then: HostSample, now: HostSample) -> tuple[float, float, float]:
    """(other processes' CPU, disk wait, steal) between two samples, in percent of one CPU.  A process of the run
    that ended between them leaves its CPU time to the others: the run is then not cut, never cut wrongly."""
    seconds = max(now.at - then.at, 1e-6)
    other = max(0.0, now.busy - then.busy - cpu_since(then.own, now.own))
    return (100 * other / seconds, 100 * (now.iowait - then.iowait) / seconds,
            100 * (now.steal - then.steal) / seconds)


def gpu_others(own: set[int]) -> int | None:
    """How many processes not in ``own`` NVML lists on this machine's GPUs; None where it cannot tell (no NVML, or
    it lists none of the run's processes: another PID namespace)."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
        try:
            listed = [p.pid for index in range(nvml.nvmlDeviceGetCount())
                      for p in nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(index))]
        finally:
            nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML, no driver: cannot tell
        return None
    if not set(listed) & own:
        return None
    return len({pid for pid in listed if pid not in own})


class PaceWatch:
    """Called with a run's last progress, its first process and its run id: the :class:`Cut` once the run is far
    off on a quiet machine, else None.  One per run."""

    def __init__(self, far: FarRule, device: str, sample: Callable[[int, str], HostSample] = HostSample.take,
                 gpu: Callable[[set[int]], int | None] = gpu_others):
        self.far = far
        self.device = device
        self.sample = sample
        self.gpu = gpu
        self.start: tuple[Progress, HostSample] | None = None

    def __call__(self, progress: Progress | None, pid: int, run_id: str) -> Cut | None:
        if (progress is None or progress.steps_done is None or not progress.samples_per_step
                or progress.time is None or progress.phase == "compiling"):
            return None
        if self.start is None:
            if progress.steps_done >= 1:
                self.start = progress, self.sample(pid, run_id)
            return None
        first, then = self.start
        steps, seconds = progress.steps_done - first.steps_done, progress.time - first.time
        if steps < 1 or seconds <= 0 or not far_mod.long_enough(self.far, progress.samples_per_step, steps, seconds):
            return None
        pace = far_mod.pace(steps, progress.samples_per_step, seconds)
        if pace >= self.far.floor:
            return None
        now = self.sample(pid, run_id)
        other, iowait, steal = others_percent(then, now)
        limit = self.far.max_other_cpu
        if other > limit or steal > limit or iowait > far_mod.MAX_IOWAIT:
            return None
        if self.device == "cuda" and self.gpu(set(now.own)) != 0:
            return None
        return Cut(pace, steps, seconds, self.far.floor, round(other, 1), progress.phase_window)
