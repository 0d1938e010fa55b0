"""Host metrics of one sampling span (psutil and ``os.times``), for :mod:`.telemetry`.

:class:`Host` reads the CPU times, this process's CPU time and RSS, and the disk and
network counters; each :meth:`Host.sample` adds the change since the previous reading.
:class:`Stat` (a gauge: mean and max per sample) and :class:`Rate` (an amount per unit:
total over total, max per interval) keep running figures, no per-sample history.  The
summary's fields are documented in :mod:`.telemetry`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psutil

__all__ = ["Host", "Rate", "Stat"]


class Stat:
    """Running mean and max of a gauge (one value per sample)."""

    __slots__ = ("n", "total", "max")

    def __init__(self) -> None:
        self.n, self.total, self.max = 0, 0.0, float("-inf")

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        if value > self.max:
            self.max = value

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.total / self.n, "max": self.max, "n": self.n}


class Rate:
    """Amount per unit (seconds, or CPU time for ``cpu_percent``) times ``scale``.

    ``mean`` is total amount over total units; ``max`` is over intervals of at least
    ``min_units`` (so the short last interval at stop() does not make a noisy maximum).
    """

    __slots__ = ("n", "amount", "units", "max", "scale", "min_units")

    def __init__(self, scale: float = 1.0, min_units: float = 0.0) -> None:
        self.n, self.amount, self.units, self.max = 0, 0.0, 0.0, float("-inf")
        self.scale, self.min_units = scale, min_units

    def add(self, amount: float, units: float) -> None:
        if units <= 0:
            return
        amount = max(amount, 0.0)  # a counter that went back (reset, wrap) counts as 0
        self.n += 1
        self.amount += amount
        self.units += units
        if units >= self.min_units:
            self.max = max(self.max, amount / units * self.scale)

    def as_dict(self) -> dict[str, float | int]:
        mean = self.amount / self.units * self.scale
        return {"mean": mean, "max": self.max if self.max != float("-inf") else mean, "n": self.n}


def _counters(read: Callable[[], Any]) -> Any:
    """psutil's disk or network counters, or None where the system has none (containers)."""
    try:
        return read()
    except (OSError, RuntimeError):
        return None


class Host:
    """psutil/os readings of one span; each :meth:`sample` adds the change since the last."""

    def __init__(self, min_interval: float) -> None:
        self.process = psutil.Process()
        self.rss = Stat()
        self.cpu = Rate(100.0, min_interval * (psutil.cpu_count() or 1))
        self.process_cpu = Rate(100.0, min_interval)
        self.io = {name: Rate(1.0, min_interval) for name in
                   ("disk_read_bytes_per_s", "disk_write_bytes_per_s", "net_sent_bytes_per_s", "net_recv_bytes_per_s")}
        self.disk_read, self.disk_write, self.net_sent, self.net_recv = self.io.values()
        self.has_disk = self.has_net = True
        self.last = self._read()

    @staticmethod
    def _cpu_busy_total() -> tuple[float, float]:
        t = psutil.cpu_times()
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)  # guest is in user
        return total - t.idle - getattr(t, "iowait", 0.0), total

    def _read(self) -> tuple[float, ...]:
        now = time.perf_counter()
        busy, total = self._cpu_busy_total()
        t = os.times()
        disk = _counters(psutil.disk_io_counters) if self.has_disk else None
        self.has_disk = disk is not None
        net = _counters(psutil.net_io_counters) if self.has_net else None
        self.has_net = net is not None
        return (now, busy, total, t.user + t.system + t.children_user + t.children_system,
                disk.read_bytes if disk else 0, disk.write_bytes if disk else 0,
                net.bytes_sent if net else 0, net.bytes_recv if net else 0)

    def sample(self) -> None:
        last, now = self.last, self._read()
        self.last = now
        seconds = now[0] - last[0]
        self.cpu.add(now[1] - last[1], now[2] - last[2])
        self.process_cpu.add(now[3] - last[3], seconds)
        self.rss.add(self.process.memory_info().rss)
        if self.has_disk:
            self.disk_read.add(now[4] - last[4], seconds)
            self.disk_write.add(now[5] - last[5], seconds)
        if self.has_net:
            self.net_sent.add(now[6] - last[6], seconds)
            self.net_recv.add(now[7] - last[7], seconds)

    def summary(self) -> dict[str, Any]:
        stats: dict[str, Stat | Rate] = {"cpu_percent": self.cpu, "process_cpu_percent": self.process_cpu,
                                           "rss_bytes": self.rss, **self.io}
        return {name: stat.as_dict() for name, stat in stats.items() if stat.n}
