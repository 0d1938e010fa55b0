"""The host's own speed, read by a process of its own between a case's runs (issue 53).

``python -m pytest_dlperf.worker.hostprobe`` times the worker's two host probes (:class:`.interference.MemoryProbe`,
:class:`.interference.CoreProbe`: a 32 MiB copy and small float32 matrix products in numpy) :data:`ROUNDS` times
each, alternating, and prints one JSON line: their medians, ``memory_gbs`` and ``core_gflops``.

The controller starts it after a run's process tree has ended and before the next run starts, so nothing of the
code under test runs beside it: unlike the probes a worker times between its own windows, which its own threads can
slow, this reading is the host's alone.  A baseline being saved keeps its runs' readings, and a later session
compares its own with them to tell a host that moved from code that did (:mod:`pytest_dlperf.gate.sequential`).
"""

from __future__ import annotations

import json
import math
import statistics
import sys

from .interference import CoreProbe, MemoryProbe

#: Readings of each probe; their median is the figure.
ROUNDS = 7


def read(rounds: int = ROUNDS) -> dict[str, float]:
    """The medians of ``rounds`` readings of each probe (a probe that could not be made is left out)."""
    memory, core = MemoryProbe(), CoreProbe()
    try:
        for _ in range(rounds):
            memory()
            core()
    finally:
        memory.close()
        core.close()
    out = {}
    for key, rates in (("memory_gbs", memory.rates), ("core_gflops", core.rates)):
        if rates:
            out[key] = round(statistics.median(rates), 3)
    return out


def index(reading: dict[str, float] | None) -> float | None:
    """One figure of the host's speed from a reading: the geometric mean of its memory bandwidth and core speed
    (None where either is missing)."""
    if not reading or not reading.get("memory_gbs") or not reading.get("core_gflops"):
        return None
    return math.sqrt(reading["memory_gbs"] * reading["core_gflops"])


def main() -> int:
    print(json.dumps(read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
