"""GPU (NVML) and host (psutil) telemetry sampled in a background thread.

A :class:`Telemetry` samples about every ``interval`` seconds between :meth:`~Telemetry.start`
and :meth:`~Telemetry.stop`, keeping running sums and maxima (no per-sample history), and
:meth:`~Telemetry.summary` returns a JSON-serialisable dict::

    sampler = Telemetry(gpu_indices=[0], interval=0.1)  # [] or None: host metrics only
    sampler.start()          # returns once the baseline is taken
    ...                      # the measured windows
    sampler.stop()           # prompt: takes one last sample and joins the thread
    summary = sampler.summary()

or ``with Telemetry([0]) as sampler: ...``.  A sampler covers one span: start/stop bracket
exactly what is summarized (the worker starts it after the warm-up).

GPU metrics per device (``summary["gpu"]["devices"][str(index)]``), each ``{"mean", "max", "n"}``:
``utilization_gpu`` and ``utilization_memory`` (%, NVML's busy time of the SMs and of the
memory controller), ``memory_used_bytes``, ``power_w``, ``sm_clock_mhz``, ``temperature_c``;
plus ``throttle_reasons`` (sorted names of every clock event reason seen, see
:func:`decode_clock_reasons`) and ``throttle_samples`` (samples each reason was seen in).
A metric the GPU does not support (``NVMLError_NotSupported``) is left out and named in
``unsupported``; other per-metric NVML errors are counted in ``errors``.

Host metrics (``summary["host"]``): ``cpu_percent`` (system-wide, all CPUs = 100),
``process_cpu_percent`` (this process and its reaped children, one core = 100, so it can
exceed 100), ``rss_bytes`` (this process), ``disk_read_bytes_per_s``,
``disk_write_bytes_per_s``, ``net_sent_bytes_per_s``, ``net_recv_bytes_per_s`` (system-wide,
all disks / all interfaces including loopback).  For the rates and CPU percentages ``mean``
is over the whole span (total over total) and ``max`` the highest sampling interval.

No NVIDIA driver is not an error: ``summary["gpu"]`` is ``{"available": false, "reason":
"unavailable: NVML library not found", "devices": {}}``, host metrics are still collected,
and the unavailability is logged once per process.  Nothing here raises into the caller
once the sampler is built: an exception in the thread ends sampling and is recorded in
``summary["error"]``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .host import Host, Stat

__all__ = ["Telemetry", "decode_clock_reasons", "nvml_index"]

log = logging.getLogger(__name__)

#: Clock event ("throttle") reason bits, from nvml.h (``nvmlClocksEventReason*``).
CLOCK_REASONS: dict[int, str] = {
    0x1: "idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}

_STOP_TIMEOUT = 2.0  # seconds stop() waits for the thread (an NVML call could hang)
_START_TIMEOUT = 10.0  # seconds start() waits for NVML init and the baseline

_warned_lock = threading.Lock()
_warned_unavailable = False  # the NVML-unavailable message is logged once per process


def decode_clock_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock event (throttle) reasons mask, lowest bit first.

    Unknown bits come out as ``"unknown_0x..."``.  ``0`` (no reason) gives ``[]``.
    """
    names = []
    while mask:
        bit = mask & -mask
        names.append(_reason_name(bit))
        mask ^= bit
    return names


def _reason_name(bit: int) -> str:
    return CLOCK_REASONS.get(bit, f"unknown_{bit:#x}")


def _parse_visible_devices(value: str) -> list[int | str]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: integers or ``GPU-``/``MIG-`` UUIDs (whole or
    a prefix), up to the first entry that is neither (``"0,1,-1,2"`` shows devices 0 and 1)."""
    out: list[int | str] = []
    for entry in (part.strip() for part in value.split(",")):
        if entry.isdigit():
            out.append(int(entry))
        elif entry.startswith(("GPU-", "MIG-")):
            out.append(entry)
        else:
            break
    return out


def nvml_index(torch_index: int) -> int | str:
    """The NVML identifier of the CUDA (torch) device ``torch_index``, for :class:`Telemetry`.

    Without ``CUDA_VISIBLE_DEVICES`` it is ``torch_index`` itself.  With it, the entry at
    ``torch_index``: a physical index (``CUDA_VISIBLE_DEVICES=2,3``: torch device 0 is NVML
    device 2) or a UUID string (``GPU-...``/``MIG-...``, whole or a unique prefix), which
    :class:`Telemetry` looks up by UUID.  Raises ``ValueError`` if the device is not visible.

    Caveat: CUDA numbers devices fastest-first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``,
    while NVML numbers them in PCI bus order; on a machine with mixed GPU models the
    integer mapping can then be wrong.  The UUID form is exact.
    """
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return torch_index
    visible = _parse_visible_devices(value)
    if not 0 <= torch_index < len(visible):
        raise ValueError(f"CUDA device {torch_index} is not visible (CUDA_VISIBLE_DEVICES={value!r})")
    return visible[torch_index]


class _Gpu:
    """The NVML readings of one device."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        self.name = _nvml_or_none(lambda: str(nvml.nvmlDeviceGetName(handle)))
        # (metric names, reader returning one value per name): a reader fails as a whole.
        self.readers: list[tuple[tuple[str, ...], Callable[[], tuple[float, ...]], tuple[Stat, ...]]] = []
        for names, read in (
            (("utilization_gpu", "utilization_memory"), self._utilization),
            (("memory_used_bytes",), lambda: (nvml.nvmlDeviceGetMemoryInfo(handle).used,)),
            (("power_w",), lambda: (nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,)),
            (("sm_clock_mhz",), lambda: (nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),)),
            (("temperature_c",), lambda: (nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),)),
        ):
            self.readers.append((names, read, tuple(Stat() for _ in names)))
        self.stats = {name: stat for names, _, stats in self.readers for name, stat in zip(names, stats)}
        self.reasons_fn: Callable[[Any], int] | None = getattr(
            nvml, "nvmlDeviceGetCurrentClocksEventReasons", nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
        try:
            self.reasons_fn(handle)
        except nvml.NVMLError_FunctionNotFound:  # a driver older than the ClocksEvent API
            self.reasons_fn = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        except nvml.NVMLError:
            pass  # counted when sampling
        self.reason_counts: dict[int, int] = {}
        self.unsupported: list[str] = []
        self.errors: dict[str, dict[str, Any]] = {}

    def _utilization(self) -> tuple[float, float]:
        rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
        return rates.gpu, rates.memory

    def _failed(self, names: tuple[str, ...], exc: Exception) -> bool:
        """Record a failed read; True if the metrics are unsupported (stop reading them)."""
        if isinstance(exc, self.nvml.NVMLError_NotSupported):
            self.unsupported.extend(names)
            return True
        for name in names:
            entry = self.errors.setdefault(name, {"count": 0, "message": str(exc)})
            entry["count"] += 1
        return False

    def sample(self) -> None:
        nvml = self.nvml
        for item in tuple(self.readers):
            names, read, stats = item
            try:
                values = read()
            except nvml.NVMLError as exc:
                if self._failed(names, exc):
                    self.readers.remove(item)
                continue
            for stat, value in zip(stats, values):
                stat.add(value)
        if self.reasons_fn is None:
            return
        try:
            mask = self.reasons_fn(self.handle)
        except nvml.NVMLError as exc:
            if self._failed(("throttle_reasons",), exc):
                self.reasons_fn = None
            return
        while mask:
            bit = mask & -mask
            self.reason_counts[bit] = self.reason_counts.get(bit, 0) + 1
            mask ^= bit

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        out.update((name, stat.as_dict()) for name, stat in self.stats.items() if stat.n)
        counts = {_reason_name(bit): n for bit, n in sorted(self.reason_counts.items())}
        out["throttle_reasons"] = sorted(counts)
        out["throttle_samples"] = counts
        out["unsupported"] = list(self.unsupported)
        out["errors"] = {name: dict(entry) for name, entry in list(self.errors.items())}
        return out


def _nvml_or_none(read: Callable[[], str]) -> str | None:
    try:
        return read()
    except Exception:  # noqa: BLE001 - a name is nice to have
        return None


def unavailable_reason(nvml: Any, exc: Exception) -> str:
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        return "unavailable: NVML library not found"
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return "unavailable: NVIDIA driver not loaded"
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return "unavailable: no permission to use NVML"
    return f"unavailable: NVML error: {exc}"


def _log_unavailable_once(reason: str) -> None:
    global _warned_unavailable
    with _warned_lock:
        if _warned_unavailable:
            return
        _warned_unavailable = True
    log.warning("GPU telemetry %s; collecting host metrics only", reason)


def _find_handle(nvml: Any, key: int | str) -> Any:
    """The NVML handle of a physical index or a (whole or unique prefix of a) UUID."""
    if isinstance(key, int):
        return nvml.nvmlDeviceGetHandleByIndex(key)
    try:
        return nvml.nvmlDeviceGetHandleByUUID(key)
    except nvml.NVMLError:
        matches = [handle for handle in map(nvml.nvmlDeviceGetHandleByIndex, range(nvml.nvmlDeviceGetCount()))
                   if str(nvml.nvmlDeviceGetUUID(handle)).startswith(key)]
        if len(matches) != 1:
            raise ValueError(f"{len(matches)} GPUs have a UUID starting with {key!r}") from None
        return matches[0]


class Telemetry:
    """Sample GPU and host metrics every ``interval`` seconds between start() and stop().

    ``gpu_indices``: NVML device indices (or UUID strings, see :func:`nvml_index`) to
    sample; ``None`` or empty samples the host only.  The summary's device keys are
    ``str(index)``.  Usable once: one start()/stop() span.
    """

    def __init__(self, gpu_indices: Sequence[int | str] | None = None, interval: float = 0.1) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be positive, not {interval!r}")
        self.gpu_indices: tuple[int | str, ...] = tuple(gpu_indices or ())
        self.interval = float(interval)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._host: Host | None = None
        self._gpus: dict[str, _Gpu] = {}
        self._gpu_available = False
        self._gpu_reason: str | None = "no GPU requested" if not self.gpu_indices else "not started"
        self._gpu_errors: dict[str, str] = {}
        self._samples = 0
        self._duration = 0.0
        self._error: str | None = None

    def start(self) -> Telemetry:
        """Start sampling; returns once NVML is initialised and the baseline taken."""
        if self._thread is not None:
            raise RuntimeError("a Telemetry samples one span: start() was already called")
        self._thread = threading.Thread(target=self._run, name="dlperf-telemetry", daemon=True)
        self._thread.start()
        self._ready.wait(_START_TIMEOUT)
        return self

    def stop(self) -> None:
        """Take a last sample and end the thread (within about a sample's time); idempotent."""
        if self._thread is None or self._stop.is_set():
            return
        self._stop.set()
        if self._thread.ident is None:  # start() failed to start it (no memory for its stack): nothing to join
            return
        self._thread.join(_STOP_TIMEOUT)
        if self._thread.is_alive() and self._error is None:
            self._error = f"the sampling thread did not stop within {_STOP_TIMEOUT} s"

    def __enter__(self) -> Telemetry:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def summary(self) -> dict[str, Any]:
        """The JSON-serialisable summary (see the module docstring); a snapshot if still running."""
        devices: dict[str, Any] = {key: gpu.summary() for key, gpu in self._gpus.items()}
        devices.update((key, {"error": message}) for key, message in self._gpu_errors.items())
        return {
            "gpu": {"available": self._gpu_available, "reason": self._gpu_reason, "devices": devices},
            "host": self._host.summary() if self._host else {},
            "samples": self._samples,
            "interval": self.interval,
            "duration": self._duration,
            "error": self._error,
        }

    # -- the thread ---------------------------------------------------------------

    def _init_gpus(self) -> Any:
        """Initialise NVML and get the handles; returns the pynvml module or None."""
        if not self.gpu_indices:
            return None
        try:
            import pynvml as nvml
        except ImportError:
            self._gpu_reason = "unavailable: pynvml (nvidia-ml-py) is not installed"
            _log_unavailable_once(self._gpu_reason)
            return None
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            self._gpu_reason = unavailable_reason(nvml, exc)
            _log_unavailable_once(self._gpu_reason)
            return None
        for key in self.gpu_indices:
            try:
                self._gpus[str(key)] = _Gpu(nvml, _find_handle(nvml, key))
            except (nvml.NVMLError, ValueError) as exc:
                self._gpu_errors[str(key)] = f"{type(exc).__name__}: {exc}"
        self._gpu_available = bool(self._gpus)
        self._gpu_reason = None if self._gpus else "none of the requested GPUs was found"
        return nvml

    def _run(self) -> None:
        nvml = None
        began = time.perf_counter()
        try:
            nvml = self._init_gpus()
            self._host = Host(self.interval / 2)
            began = self._host.last[0]
            self._ready.set()
            deadline = began + self.interval
            while True:
                stopping = self._stop.wait(max(0.0, deadline - time.perf_counter()))
                self._host.sample()
                for gpu in self._gpus.values():
                    gpu.sample()
                self._samples += 1
                self._duration = self._host.last[0] - began
                if stopping:
                    break
                # Keep to the ~interval grid, but after a stall do not sample in a burst.
                deadline = max(deadline + self.interval, time.perf_counter())
        except Exception as exc:  # noqa: BLE001 - never raise into the caller; record it
            self._error = f"{type(exc).__name__}: {exc}"
            self._duration = time.perf_counter() - began
        finally:
            if nvml is not None:
                try:
                    nvml.nvmlShutdown()
                except nvml.NVMLError as exc:
                    self._error = self._error or f"nvmlShutdown: {exc}"
            self._ready.set()
