"""A run's figure: the median of its windows, whether a named cause made it no evidence, and its host probes.

A run is *busy*, no evidence either way, only for a cause the message names (:func:`busy_reason`), each
measured outside the case's own processes: other processes on the machine's CPUs while they were saturated,
the hypervisor's steal, another process on the case's GPU.  Clock throttling is named, never an excuse
(:func:`throttle_notes`): it is usually the training's own heat.  The host
probes (:class:`HostProbe`: memory bandwidth and core speed, timed by the worker between windows) excuse
nothing in a verdict: they run beside the case's own processes (its data loaders, its memory traffic), so a
build that itself streams more memory reads them lower, and an excuse the code under test can trigger is no
excuse.  Where the counted runs' probes read far from the baseline's, the verdict says so beside its figures
(:func:`probe_notes`); the drift of a host between sessions is in the verdict's interval
(:mod:`pytest_dlperf.gate.drift`).  A baseline being saved keeps its runs whose probes dip, as a session does: a
save that set them aside (it did, to 0.6.0) read the host's fast moments only, and on a host that spends a third of
its time slow every later session read below it (6 of 20 unchanged sessions failed, 2026-11-29).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..results.runs import RunRecord

#: Default: a run is busy when other processes used more than this much CPU (percent of one CPU)
#: during its windows, while the machine's CPUs were saturated.
MAX_INTERFERENCE = 50.0
#: A machine counts as saturated when all processes together used this share of its CPUs.
SATURATED = 0.9
#: Clock throttling that comes from the machine's state, not the training itself, seen in
#: more than this share of the telemetry's samples.
THROTTLE_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
THROTTLE_SHARE = 0.1
#: Default: a host probe (memory bandwidth, core speed) is named beside the verdict where the counted runs'
#: median read more than this far from the baseline's, and outside :data:`PROBE_SIGMAS` of the probe's own
#: spread between the baseline's runs.
MAX_BANDWIDTH_DROP = 0.10
MAX_CORE_DROP = 0.10
PROBE_SIGMAS = 3


@dataclasses.dataclass(frozen=True)
class HostProbe:
    """A probe of what the host's other tenants can take from a run, timed by the worker between windows.

    ``key`` names its figure in the run's ``interference``, in a baseline entry (the median of the
    baseline's counted runs; their readings in ``probe_runs``) and on :class:`pytest_dlperf.results.case.Expected`.
    """

    key: str
    what: str  # for messages: "memory bandwidth"
    unit: str


MEMORY = HostProbe("memory_gbs", "memory bandwidth", "GB/s")
CORE = HostProbe("core_gflops", "core speed", "GFLOP/s")
#: Every host probe, in the order messages name them.
HOST_PROBES = (MEMORY, CORE)


@dataclasses.dataclass(frozen=True)
class RunFigure:
    """One run: its median, and why it is no evidence (None: it is)."""

    index: int
    value: float
    busy: str | None = None
    bandwidth: float | None = None  # the run's memory probe, GB/s (interference.memory_gbs)
    core: float | None = None  # the run's core probe, GFLOP/s (interference.core_gflops)
    far: bool = False  # cut short far off its baseline (:mod:`.far`): ``value`` is its pace until then
    host: float | None = None  # the controller's own probe of the host after the run (:mod:`.host`)

    def probe(self, probe: HostProbe) -> float | None:
        """The run's figure of ``probe`` (:data:`MEMORY`, :data:`CORE`)."""
        return self.bandwidth if probe is MEMORY else self.core

    def to_dict(self) -> dict[str, Any]:
        out = {"index": self.index, "throughput": self.value, "busy": self.busy, "memory_gbs": self.bandwidth,
               "core_gflops": self.core}
        if self.far:
            out["far_off"] = True
        if self.host is not None:
            out["host"] = self.host
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunFigure:
        return cls(data["index"], data["throughput"], data.get("busy"), data.get(MEMORY.key), data.get(CORE.key),
                   bool(data.get("far_off")), data.get("host"))


def busy_reason(interference: Mapping[str, Any] | None, threshold: float | None = MAX_INTERFERENCE) -> str | None:
    """Why a run's windows were measured on a busy machine, or None.  ``threshold`` None: never busy.

    Other processes' CPU (or the hypervisor's steal) above ``threshold`` percent of one CPU
    counts where the machine's CPUs were saturated (a process on an idle core takes nothing
    from the case; the kernel's own work is never other processes': what the run made it do cannot be told from a
    neighbour's); other processes on the case's GPU always count.  Clock throttling does not:
    it is usually the workload's own heat, which the code under test controls (:func:`throttle_notes`
    names it beside the verdict).
    """
    if threshold is None or not interference:
        return None
    reasons = []
    other, steal = interference.get("other_cpu_percent", 0.0), interference.get("steal_percent", 0.0)
    capacity = 100.0 * interference.get("cpus", 1)
    used = other + steal + interference.get("own_cpu_percent", 0.0) + interference.get("kernel_cpu_percent", 0.0)
    if other + steal > threshold and used >= SATURATED * capacity:
        what = f"other processes used {other:.0f}% CPU"
        reasons.append(what + (f", steal {steal:.0f}%" if steal >= 1 else ""))
    if interference.get("gpu_other_processes"):
        reasons.append(f"{interference['gpu_other_processes']} other process(es) on the GPU")
    return "; ".join(reasons) or None


def throttled(telemetry: Any) -> list[str]:
    """The throttle reasons (:data:`THROTTLE_REASONS`) a run's GPU telemetry saw in more than
    :data:`THROTTLE_SHARE` of its samples."""
    seen: dict[str, None] = {}
    summaries = telemetry if isinstance(telemetry, list) else [telemetry] if telemetry else []
    for summary in summaries:
        for device in ((summary or {}).get("gpu") or {}).get("devices", {}).values():
            counts, samples = device.get("throttle_samples") or {}, max(1, (summary or {}).get("samples") or 1)
            seen.update((r, None) for r in THROTTLE_REASONS if counts.get(r, 0) > THROTTLE_SHARE * samples)
    return list(seen)


def throttle_notes(runs: Sequence[RunRecord]) -> list[str]:
    """A line naming the runs whose GPU clocks were throttled (thermal, power brake), or none.  Their figures
    count: throttling is usually the training's own heat, no excuse for it; the line says where to look."""
    hit = {run.index: throttled(run.telemetry) for run in runs if run.median is not None}
    hit = {index: reasons for index, reasons in hit.items() if reasons}
    if not hit:
        return []
    reasons = ", ".join(dict.fromkeys(r for found in hit.values() for r in found))
    return [f"GPU clocks throttled ({reasons}) in {len(hit)} of {sum(r.median is not None for r in runs)} run(s): "
            "counted, as the training's own heat usually causes it; check the cooling and power limits "
            "if the figures fell"]


def drop_of(probe: HostProbe, drops: Mapping[str, float | None] | None) -> float | None:
    """``probe``'s drop: as ``drops`` gives it (None: never named), else its default."""
    return (drops or {}).get(probe.key, MAX_BANDWIDTH_DROP if probe is MEMORY else MAX_CORE_DROP)


def _reach(probe: HostProbe, reference: float | None, readings: Sequence[float] | None,
           drops: Mapping[str, float | None] | None) -> tuple[float, float] | None:
    """How far ``probe`` may read from its ``reference`` before it is named: (the larger of its drop and
    :data:`PROBE_SIGMAS` x its CV between the baseline's runs, that CV x 3); None where it is never named."""
    drop = drop_of(probe, drops)
    if drop is None or not reference:
        return None
    readings = [v for v in readings or [] if v]
    own = PROBE_SIGMAS * statistics.stdev(readings) / statistics.fmean(readings) if len(readings) >= 3 else 0.0
    return max(drop, own), own


def probe_notes(figures: Sequence[RunFigure], references: Mapping[str, float | None],
                spreads: Mapping[str, Sequence[float]] | None = None,
                drops: Mapping[str, float | None] | None = None) -> list[str]:
    """What the counted runs' host probes (their median) say against the baseline's, where they read far from
    it: more than the probe's ``drops`` (:data:`MAX_BANDWIDTH_DROP`, :data:`MAX_CORE_DROP` on the CPU; None: never
    named, a GPU case's)
    and outside :data:`PROBE_SIGMAS` of the probe's own spread between the baseline's runs (``spreads``: their
    readings).  A slower probe decides nothing (the case's own processes can lower it; it may explain part of a
    slowdown); faster ones may hide a slowdown, and the case is judged on their scale too where their means moved
    (:func:`.host.probes_faster`).

    ``references``: the baseline's probe figures, by :attr:`HostProbe.key`.
    """
    notes = []
    for probe, median, reference, own in _far_probes(figures, references, spreads, drops):
        change = median / reference - 1
        why = (f"outside {PROBE_SIGMAS} x its spread between the baseline's runs ({100 * own / PROBE_SIGMAS:.0f}% CV)"
               if own else "")
        if change > 0:
            notes.append(f"the host's {probe.what} read {change:.0%} above the baseline's ({median:.1f} against "
                         f"{reference:.1f} {probe.unit}{', ' + why if why else ''}): a slowdown may hide behind it")
        else:
            notes.append(f"the host's {probe.what} read {-change:.0%} below the baseline's ({median:.1f} against "
                         f"{reference:.1f} {probe.unit}{', ' + why if why else ''}): another tenant of the host may "
                         f"have slowed the runs")
    return notes


def _far_probes(figures: Sequence[RunFigure], references: Mapping[str, float | None],
                spreads: Mapping[str, Sequence[float]] | None,
                drops: Mapping[str, float | None] | None) -> list[tuple[HostProbe, float, float, float]]:
    """The probes whose counted runs' median reads beyond their reach (:func:`_reach`) from the baseline's: (the
    probe, that median, the baseline's figure, the probe's own spread x :data:`PROBE_SIGMAS`)."""
    out = []
    for probe in HOST_PROBES:
        reference = references.get(probe.key)
        reach = _reach(probe, reference, (spreads or {}).get(probe.key), drops)
        values = [f.probe(probe) for f in figures if not f.busy and f.probe(probe)]
        if reach is None or not values:
            continue
        (limit, own), median = reach, statistics.median(values)
        if abs(median / reference - 1) > limit:
            out.append((probe, median, reference, own))
    return out


def run_figures(runs: Sequence[RunRecord], threshold: float | None = MAX_INTERFERENCE) -> list[RunFigure]:
    """Each run's median of windows (:attr:`~pytest_dlperf.results.runs.RunRecord.median`), whether it was busy
    (:func:`busy_reason`: a named cause), its host probes and the controller's probe after it (:mod:`.host`)."""
    out = []
    for run in runs:
        if run.far_off is not None:
            out.append(RunFigure(run.index, run.far_off["pace"], far=True))
            continue
        median = run.median
        if median is None:
            continue
        interference = run.interference or {}
        out.append(RunFigure(run.index, median, busy_reason(interference, threshold),
                             interference.get(MEMORY.key), interference.get(CORE.key),
                             host=(run.host_probe or {}).get("index")))
    return out
