"""Whose hardware a baseline's figures are: GPU and CPU model names compared as people write them.

A baseline names the GPU or CPU its figures were measured on (``hardware``); a session compares it with
this machine's (:func:`pytest_dlperf.baseline.document.device_mismatch`) and picks a folder's file by it
(:mod:`.machines`).  Names differ in vendor words, trademark signs and how far they go ("A100" and
"NVIDIA A100-SXM4-80GB"); these functions say when two of them mean the same model.

A name does not say everything: a GPU's board (:class:`Board`: its memory, power limit and highest clock) and a
CPU's speed as the workers' host probes read it (:func:`host_figures`) tell apart machines one name covers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

_VENDOR_WORDS = {"nvidia", "tesla"}


def normalize_gpu_name(name: str) -> str:
    """A GPU name for comparison: lower case, words split at spaces, dashes and underscores,
    without the "NVIDIA" / "Tesla" vendor words ("Tesla V100-SXM2-16GB" -> "v100 sxm2 16gb")."""
    words = [w for w in re.split(r"[\s_\-]+", name.lower()) if w and w not in _VENDOR_WORDS]
    return " ".join(words)


def same_gpu_model(a: str, b: str) -> bool:
    """Whether two GPU names mean the same model; the less specific name may stop early
    ("A100" matches "NVIDIA A100-SXM4-80GB"; "V100-SXM2-16GB" does not match "V100-SXM2-32GB")."""
    wa, wb = normalize_gpu_name(a).split(), normalize_gpu_name(b).split()
    shorter, longer = sorted((wa, wb), key=len)
    return bool(shorter) and longer[:len(shorter)] == shorter


# --------------------------------------------------------------------------- CPU names


_CPU_NOISE = re.compile(r"\((?:r|tm|c)\)|@.*$|\b\d+-core\b|\b(?:cpu|processor)\b")


def normalize_cpu_name(name: str) -> str:
    """A CPU name for comparison: lower case, without the trademark signs, the clock after "@",
    "N-Core" and the words "CPU" / "Processor" ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    -> "intel xeon platinum 8481c", "AMD EPYC 7B13 64-Core Processor" -> "amd epyc 7b13")."""
    text = _CPU_NOISE.sub(" ", name.lower())
    return " ".join(w for w in re.split(r"[\s_,()]+", text) if w)


def same_cpu_model(a: str, b: str) -> bool:
    """Whether two CPU names mean the same model; the less specific name may stop early, as for
    GPUs ("AMD EPYC", a virtual machine's name, matches "AMD EPYC 7B13"), but a vendor alone
    matches nothing ("Intel" does not match "Intel Xeon Platinum 8481C")."""
    wa, wb = normalize_cpu_name(a).split(), normalize_cpu_name(b).split()
    if wa == wb:
        return bool(wa)
    shorter, longer = sorted((wa, wb), key=len)
    return len(shorter) >= 2 and longer[:len(shorter)] == shorter


# --------------------------------------------------------------------------- what a name does not say


#: A file's host figures (the median of its entries' core and memory probes) more than this many times this host's
#: best reading, or less than its share, say that it was measured on another machine, whatever the names say: a VM's
#: "AMD EPYC" names CPUs 5x apart.  Wide, since one host's probes spread 2x between the entries of one file.
PROBE_FACTOR = 3.0
#: Two GPUs of one name whose memory, power limit or highest SM clock differ by more than this share are two
#: machine classes (an H100 capped at 500 W is not one at 700 W).
BOARD_SPREAD = 0.10


@dataclasses.dataclass(frozen=True)
class Board:
    """What tells two GPUs of one name apart, as NVML gives it (None: not known)."""

    memory_gib: float | None = None
    power_w: float | None = None
    sm_mhz: float | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Board | None:
        """From a device of the environment (``memory_bytes``, ``power_limit_w``, ``max_sm_clock_mhz``) or a
        baseline's ``hardware`` (``gpu_memory_gib``, ``gpu_power_limit_w``, ``gpu_sm_clock_mhz``)."""
        def number(*keys: str) -> float | None:
            found = next((fields[k] for k in keys if isinstance(fields.get(k), int | float)), None)
            return float(found) if found is not None else None
        memory = number("gpu_memory_gib")
        if memory is None and (raw := number("memory_bytes")) is not None:
            memory = round(raw / 2**30, 1)
        board = cls(memory, number("gpu_power_limit_w", "power_limit_w"),
                    number("gpu_sm_clock_mhz", "max_sm_clock_mhz"))
        return board if board != cls() else None

    def differs(self, other: Board) -> str | None:
        """Which figure of ``other`` is not this board's, or None (a figure either side lacks is not compared)."""
        for what, unit, mine, theirs in (("memory", "GiB", self.memory_gib, other.memory_gib),
                                         ("power limit", "W", self.power_w, other.power_w),
                                         ("highest SM clock", "MHz", self.sm_mhz, other.sm_mhz)):
            if mine and theirs and abs(theirs / mine - 1) > BOARD_SPREAD:
                return f"its GPU's {what} is {theirs:g} {unit}, this one's {mine:g} {unit}"
        return None


def host_figures(readings: int = 7) -> tuple[float | None, float | None]:
    """This host's core speed (GFLOP/s) and memory bandwidth (GB/s): the best of ``readings`` of the workers' own
    probes, each about 20 ms (None where a probe cannot run)."""
    from ..worker.interference import CoreProbe, MemoryProbe

    core, memory = CoreProbe(), MemoryProbe()
    try:
        for _ in range(readings):
            core()
            memory()
        return max(core.rates, default=None), max(memory.rates, default=None)
    finally:
        core.close()
        memory.close()
