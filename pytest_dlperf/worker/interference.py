"""What else used the machine while this run's windows were timed: the ``interference`` of a worker result.

A run measured while another job shared its CPUs or its GPU is no evidence that training got
slower.  :class:`Interference` reads, at the start of the first window and at the end of the
last (never inside a timed window; chained like the telemetry sampler, :meth:`start` /
:meth:`stop`):

* the CPU time of the whole machine (psutil's ``cpu_times``: busy = total - idle - iowait -
  steal, guest time being part of user time) and the CPU time of the case's own processes:
  every process whose environment carries this run's ``DLPERF_RUN_ID`` (the worker, the
  torchrun agent, every rank and their data-loader workers) and every process descending from
  them, whatever its environment (a model's own helpers are its load, not a neighbour's).
  ``other_cpu_percent`` is the difference over the windows' wall time, in percent of one CPU
  (200: two CPUs kept busy by other processes).  The kernel's own work (interrupts, softirqs, kernel
  threads: ``kernel_cpu_percent``) is left out of it: what a run made the kernel do (its disk writes,
  its page faults, its sockets) cannot be told from what a neighbour did, so it is never a neighbour's;
* ``steal_percent``: time the hypervisor gave this VM's CPUs to others, where the kernel
  reports it (``cpu_times().steal``), in percent of one CPU;
* on CUDA, the processes NVML lists on this rank's GPU that are not the case's own
  (``nvmlDeviceGetComputeRunningProcesses``), with their memory.  Where NVML does not list
  this process itself (a container whose PIDs NVML cannot see), the count is left out
  (``gpu_other_processes`` null, with the reason) rather than guessed.

* ``memory_gbs``: the machine's memory bandwidth as this process gets it, from a copy probe
  (:class:`MemoryProbe`) timed before the first window, between windows and after the last.
  Other tenants of a shared host take memory bandwidth without using this machine's CPUs: on
  the project's 2-core VM, 60 fresh training processes of ``tiny`` ran at 2,600-4,250 img/s
  (CV 12%) and their probe followed them (Pearson r = 0.89 of the logs; README, "Where the
  spread between runs comes from").  The controller compares it with the baseline's.

* ``core_gflops``: the arithmetic one core gives this process, from float32 matrix products in
  numpy (:class:`CoreProbe`), timed with the memory probe.  Another tenant can take a vCPU's
  core (a busy sibling hyperthread) without using this machine's CPUs or its memory bandwidth:
  on the project's 2-core VM, an hour when the runs of one case spread by 18% (CV) with the
  bandwidth flat, the probe followed them (r = 0.90).

Clock throttling is already sampled by the telemetry (``throttle_reasons``); the controller
reads it from there (:mod:`pytest_dlperf.gate.figures`).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import psutil

RUN_ID_VARIABLE = "DLPERF_RUN_ID"  # the controller's pytest_dlperf.launch.process.RUN_ID_VARIABLE


def own_processes() -> list[psutil.Process]:
    """The case's processes: those tagged with this run's id (else this process) and every process descending from
    them, whatever its environment.  A model's own helpers (a library that shells out with a clean environment, a
    data loader's workers) are the case's load, never a neighbour's that could excuse its slowdown."""
    run_id = os.environ.get(RUN_ID_VARIABLE)
    me = psutil.Process()
    roots = [me]
    if run_id:
        for proc in psutil.process_iter():
            try:
                if proc.pid != me.pid and proc.environ().get(RUN_ID_VARIABLE) == run_id:
                    roots.append(proc)
            except (psutil.Error, OSError):
                continue
    found = {proc.pid: proc for proc in roots}
    for root in roots:
        try:
            found.update((child.pid, child) for child in root.children(recursive=True))
        except (psutil.Error, OSError):
            continue
    return list(found.values())


def cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds (user + system, with reaped children's) of each process still alive, by pid."""
    out = {}
    for proc in procs:
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system + t.children_user + t.children_system
        except (psutil.Error, OSError):
            continue
    return out


def cpu_since(then: dict[int, float], now: dict[int, float]) -> float:
    """The CPU seconds the processes of ``now`` (:func:`cpu_seconds`) used since ``then``; one that ended between the
    two is left out (its time since counts for nobody), one that started counts whole."""
    return sum(cpu - then.get(pid, 0.0) for pid, cpu in now.items())


def machine_times(times=None) -> tuple[float, float, float]:
    """(busy CPU seconds of processes, disk wait seconds, steal seconds) of the whole machine: busy is all but idle,
    disk wait, steal, interrupts and softirqs (the kernel's own work, with :func:`kernel_threads`' time).
    ``times``: psutil's ``cpu_times()``, read where None."""
    t = psutil.cpu_times() if times is None else times
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    iowait, steal = getattr(t, "iowait", 0.0), getattr(t, "steal", 0.0)
    return total - t.idle - iowait - steal - interrupt_seconds(t), iowait, steal


def interrupt_seconds(times=None) -> float:
    """CPU seconds of the machine's interrupts and softirqs (``times``: psutil's ``cpu_times()``; read where None)."""
    t = psutil.cpu_times() if times is None else times
    return getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def kernel_threads() -> list[psutil.Process]:
    """The kernel's threads: kthreadd and its children (pid 2 and ppid 2 on Linux; none where this process cannot see
    them, another PID namespace).  Their time, with the interrupts', is the kernel's own work."""
    found = []
    for proc in psutil.process_iter(["ppid"]):
        if proc.pid == 2 or proc.info.get("ppid") == 2:
            found.append(proc)
    return found


def _machine() -> tuple[float, float, float]:
    """(busy CPU seconds of processes, steal seconds, interrupt and softirq seconds) of the whole machine."""
    t = psutil.cpu_times()
    busy, _, steal = machine_times(t)
    return busy, steal, interrupt_seconds(t)


#: The probe's buffers: two of this size, larger than most L3 caches' share of one process, so a copy
#: goes to memory (and contends for it with the host's other tenants).
PROBE_BYTES = 32 << 20
#: Each probe copies for about this long (at least :data:`PROBE_COPIES` copies).
PROBE_SECONDS = 0.02
PROBE_COPIES = 3


class MemoryProbe:
    """Times copies of :data:`PROBE_BYTES` (``memoryview`` slice assignment: a ``memcpy``, no torch, no
    threads) in GB/s; :meth:`close` frees its buffers.  Not made (``error`` says why) where the memory
    for them cannot be had, as under a tight ``--dlperf-max-memory``."""

    def __init__(self, size: int = PROBE_BYTES):
        self.size = size
        self.rates: list[float] = []
        self.error: str | None = None
        try:
            source = bytearray(b"\x5a") * size  # written, so its pages are real (not the shared zero page)
            self._buffers: tuple[memoryview, memoryview] | None = (memoryview(source), memoryview(bytearray(size)))
            self._copy()  # the destination's pages faulted in, outside any timing
        except MemoryError:
            self._buffers, self.error = None, f"no memory for the probe's {2 * size >> 20} MiB"

    def _copy(self) -> None:
        source, destination = self._buffers
        destination[:] = source

    def __call__(self) -> float | None:
        """One probe: GB/s of copying, appended to :attr:`rates` (None without buffers)."""
        if self._buffers is None:
            return None
        copies, began = 0, time.perf_counter()
        while True:
            self._copy()
            copies += 1
            elapsed = time.perf_counter() - began
            if copies >= PROBE_COPIES and elapsed >= PROBE_SECONDS:
                break
        self.rates.append(copies * self.size / elapsed / 1e9)
        return self.rates[-1]

    def close(self) -> None:
        if self._buffers is not None:
            for view in self._buffers:
                view.release()
            self._buffers = None

    def figures(self) -> dict[str, Any]:
        if not self.rates:
            return {"memory_reason": self.error} if self.error else {}
        return {"memory_gbs": round(statistics.median(self.rates), 3),
                "memory_probes": [round(r, 3) for r in self.rates]}


#: The core probe's matrices: float32, this many rows and columns (9 KiB each, in any L1 cache; small enough
#: that BLAS libraries multiply them on the calling thread).
CORE_SIZE = 48
CORE_PRODUCTS = 50  # products between two looks at the clock


class CoreProbe:
    """Times float32 matrix products of :data:`CORE_SIZE` in numpy (its own BLAS, not torch's: the build under
    test is not in the probe) in GFLOP/s: the arithmetic one core gives this process.

    Another tenant of the host can take a vCPU's core without any counter inside the machine
    showing it (a busy sibling hyperthread, a lower clock): on the project's 2-core VM, fresh
    training processes of a small convnet ran at 800-1,300 img/s (CV 18%) with their memory
    bandwidth unchanged, and this probe followed them (r = 0.90, img/s ~ probe^1.0;
    ``benchmarks/machine_drift.py --copy``).  Not made (``error`` says why) without numpy."""

    def __init__(self, size: int = CORE_SIZE):
        self.rates: list[float] = []
        self.error: str | None = None
        self.flops = 2 * size ** 3
        try:
            import numpy

            rng = numpy.random.default_rng(0)
            self._a = rng.random((size, size), dtype=numpy.float32)
            self._b = rng.random((size, size), dtype=numpy.float32)
            self._a @ self._b  # the BLAS loaded and warmed, outside any timing
        except ImportError as exc:
            self._a = self._b = None
            self.error = f"no numpy for the core probe ({exc})"

    def __call__(self) -> float | None:
        """One probe: GFLOP/s of products for about :data:`PROBE_SECONDS` (None without numpy)."""
        if self._a is None:
            return None
        a, b = self._a, self._b
        products, began = 0, time.perf_counter()
        while True:
            for _ in range(CORE_PRODUCTS):
                a @ b
            products += CORE_PRODUCTS
            elapsed = time.perf_counter() - began
            if elapsed >= PROBE_SECONDS:
                break
        self.rates.append(products * self.flops / elapsed / 1e9)
        return self.rates[-1]

    def close(self) -> None:
        self._a = self._b = None

    def figures(self) -> dict[str, Any]:
        if not self.rates:
            return {"core_reason": self.error} if self.error else {}
        return {"core_gflops": round(statistics.median(self.rates), 3),
                "core_probes": [round(r, 3) for r in self.rates]}


class Interference:
    """Reads what else used the machine between :meth:`start` and :meth:`stop`; ``then``: a sampler to chain.

    :meth:`between` (between two windows) times the memory probe once more; ``probe`` False: no probe.
    """

    def __init__(self, then=None, gpu_index: int | None = None, probe: bool = True, core: bool = True):
        self.then = then
        self.gpu_index = gpu_index
        self._start: tuple[float, tuple[float, float, float], dict[int, float], dict[int, float],
                           list[psutil.Process]] | None = None
        self.figures: dict[str, Any] | None = None
        self.probe = MemoryProbe() if probe else None
        self.core = CoreProbe() if core else None

    def _probe(self) -> None:
        for probe in (self.probe, self.core):
            if probe is not None:
                probe()

    def between(self) -> None:
        """Between two windows (outside both): one more memory and core probe."""
        self._probe()

    def start(self) -> None:
        self._probe()  # before the CPU counters start: its own CPU time is the case's anyway
        procs = own_processes()
        self._start = (time.perf_counter(), _machine(), cpu_seconds(procs), cpu_seconds(kernel_threads()), procs)
        if self.then is not None:
            self.then.start()

    def stop(self) -> None:
        if self.then is not None:
            self.then.stop()
        if self._start is None or self.figures is not None:
            return
        began, (busy0, steal0, interrupts0), own0, kernel0, _ = self._start
        busy1, steal1, interrupts1 = _machine()
        seconds = time.perf_counter() - began
        procs = own_processes()
        own1, kernel1 = cpu_seconds(procs), cpu_seconds(kernel_threads())
        own, threads = cpu_since(own0, own1), cpu_since(kernel0, kernel1)
        kernel = threads + max(0.0, interrupts1 - interrupts0)
        other = max(0.0, (busy1 - busy0) - own - threads)
        self.figures = {
            "seconds": round(seconds, 4),
            "other_cpu_percent": round(100 * other / seconds, 2) if seconds > 0 else 0.0,
            "own_cpu_percent": round(100 * own / seconds, 2) if seconds > 0 else 0.0,
            "steal_percent": round(100 * max(0.0, steal1 - steal0) / seconds, 2) if seconds > 0 else 0.0,
            "kernel_cpu_percent": round(100 * max(0.0, kernel) / seconds, 2) if seconds > 0 else 0.0,
            "own_processes": len(own1),
            "cpus": psutil.cpu_count() or 1,
        }
        if self.gpu_index is not None:
            self.figures.update(gpu_others({p.pid for p in procs}, self.gpu_index))
        self._probe()
        for probe in (self.probe, self.core):
            if probe is not None:
                self.figures.update(probe.figures())
                probe.close()

    def summary(self) -> dict[str, Any] | None:
        return self.figures


def gpu_others(own: set[int], index: int) -> dict[str, Any]:
    """Other processes on NVML device ``index``: count and memory, or why they could not be told."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            listed = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - no NVML, no driver: not known, said so
        return {"gpu_other_processes": None, "gpu_reason": f"NVML: {exc}"}
    pids = {p.pid for p in listed}
    if not pids & own:
        return {"gpu_other_processes": None,
                "gpu_reason": "NVML lists none of this case's processes (another PID namespace)"}
    others = [p for p in listed if p.pid not in own]
    return {"gpu_other_processes": len(others),
            "gpu_other_memory_bytes": sum(int(p.usedGpuMemory or 0) for p in others)}
