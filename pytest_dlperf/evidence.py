"""Runs as evidence: each fresh run's median, whether the machine was busy, and the interval of the ratio.

A run is one fresh worker process.  Its windows are correlated (same process, same
allocation, same neighbours), so the *runs* are the independent samples and a run's figure is
the median of its windows (:class:`RunFigure`).  A run measured while other processes used
the machine (:func:`busy_reason`: the worker's ``interference`` and the telemetry's clock
throttling), or while its memory bandwidth or core speed was well below the baseline's
(:class:`HostProbe`: other tenants of the host), is kept in the results and is no evidence that
the case is fine (:func:`host_alone`: at most, evidence that it is slow).

:func:`estimate` gives the case's figure relative to its baseline with a confidence interval,
on the log scale (throughput is a rate: slowdowns multiply, and its spread is relative):

* the estimate is the geometric mean of the evidence runs' medians;
* the spread ``sigma`` (the standard deviation of ``log(run median)``) is pooled from three
  sources, each weighted by its degrees of freedom: the session's runs (n - 1), the
  baseline's own run medians when it kept them (``"runs"``, m - 1), and a stated prior,
  :func:`prior_sigma`, worth :data:`PRIOR_DOF` runs, so that one or two runs never give a
  spread of zero;
* the standard error of ``log(estimate / baseline)`` is ``sigma * sqrt(1/n + 1/m)`` (the
  baseline figure is itself an estimate from m runs; a published figure, m unknown, counts
  as exact: its tolerance covers it), and the interval is Student's t at the pooled degrees
  of freedom (``scipy.stats.t``).

:func:`decide`: regression when the whole interval is below ``baseline x (1 - tolerance)``,
improved when it is all above ``baseline x (1 + tolerance)``, pass when it is all above the
lower threshold; else undecided, and the session measures another run (:mod:`.sequential`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .tolerance import NOISE_SIGMAS

#: Two-sided confidence of the interval; each decision is a one-sided test at (1 - CONFIDENCE) / 2.
CONFIDENCE = 0.95
#: Weight of the prior spread, in runs' worth of degrees of freedom.
PRIOR_DOF = 3
#: The least prior spread (CV between runs), whatever the tolerance says.
FLOOR_CV = 0.01
#: Default: a run is busy when other processes used more than this much CPU (percent of one CPU)
#: during its windows, while the machine's CPUs were saturated.
MAX_INTERFERENCE = 50.0
#: A machine counts as saturated when all processes together used this share of its CPUs.
SATURATED = 0.9
#: Clock throttling that comes from the machine's state, not the training itself, seen in
#: more than this share of the telemetry's samples.
THROTTLE_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
THROTTLE_SHARE = 0.1
#: Default: a run is busy when its memory probe (``interference.memory_gbs``) measured this much less
#: bandwidth than the baseline's runs did (or, without that, than this case's fastest third of runs in the
#: session).  On the project's 2-core VM a run's throughput followed the probe's bandwidth to
#: the power 0.5: a 10% drop costs about 5%, the default tolerance.
MAX_BANDWIDTH_DROP = 0.10
#: Default: a run is busy when its core probe (``interference.core_gflops``: float32 products in numpy) measured
#: this much less than the baseline's runs did (or than this case's fastest third of runs).  On the project's
#: 2-core VM, in an hour when another tenant took half of a vCPU's core about half the time, fresh runs
#: followed the probe with r = 0.90, img/s ~ probe^1.0, their memory bandwidth flat.
MAX_CORE_DROP = 0.10
#: A run busy only for what the host took (memory bandwidth, core speed) still counts towards a regression,
#: at its allowed figure, where no process inside this machine took it: other processes and steal used at
#: most this much CPU (percent of one CPU) during its windows.  A neighbour inside the machine also evicts
#: the case's share of the caches, which a copy probe does not feel: on the project's 2-core VM, a process
#: copying memory at 50% of the other CPU slowed the case by twice what the probe lost.
QUIET_CPU = 10.0


@dataclasses.dataclass(frozen=True)
class HostProbe:
    """A probe of what the host's other tenants can take from a run, timed by the worker between windows.

    ``key`` names its median in the run's ``interference``, in a baseline entry (the median of the
    baseline's counted runs) and on :class:`pytest_dlperf.results.Expected`.
    """

    key: str
    what: str  # for messages: "memory bandwidth"
    unit: str
    #: How a case's throughput follows the probe, at most, as measured on the project's 2-core VMs (log img/s
    #: over log probe: memory bandwidth 0.34-0.5, core speed 0.72-1.0; benchmarks/README.md, machine_drift):
    #: a probe ``tolerance / slope`` below another's can cost the case its tolerance.
    slope: float = 1.0

    def reason(self, value: float | None, reference: float | None, whose: str,
               max_drop: float | None) -> str | None:
        """Why a run whose probe read ``value`` is no evidence (more than ``max_drop`` below ``reference``), or None.

        ``whose``: where the reference comes from, for the message ("the baseline's").
        """
        if max_drop is None or value is None or not reference or value >= reference * (1 - max_drop):
            return None
        return (f"{self.what} {value:.1f} {self.unit}, {100 * (1 - value / reference):.0f}% below "
                f"{whose} {reference:.1f} {self.unit}")


MEMORY = HostProbe("memory_gbs", "memory bandwidth", "GB/s", slope=0.5)
CORE = HostProbe("core_gflops", "core speed", "GFLOP/s", slope=1.0)
#: Every host probe, in the order messages name them.
HOST_PROBES = (MEMORY, CORE)


class Decision(str, enum.Enum):
    REGRESSION = "regression"
    PASS = "pass"
    IMPROVED = "improved"
    UNDECIDED = "undecided"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class RunFigure:
    """One run: its median, and why it is no evidence (None: it is)."""

    index: int
    value: float
    busy: str | None = None
    bandwidth: float | None = None  # the run's memory probe, GB/s (interference.memory_gbs)
    #: How much of the run's slowness what the host took can explain (:func:`bandwidth_allowance`, the
    #: largest of its probes'): ``value * allowance`` is the most the run could have measured with the
    #: baseline's memory bandwidth and core speed.
    allowance: float = 1.0
    #: Busy only because the host's other tenants took its memory bandwidth or core (:func:`host_alone`): no
    #: evidence that the case is fine, but its :attr:`allowed` figure is still evidence of a regression.
    host_only: bool = False
    core: float | None = None  # the run's core probe, GFLOP/s (interference.core_gflops)

    @property
    def allowed(self) -> float:
        return self.value * self.allowance

    @property
    def counts_against(self) -> bool:
        """Whether the run is evidence of a regression (at its :attr:`allowed` figure)."""
        return not self.busy or self.host_only

    def probe(self, probe: HostProbe) -> float | None:
        """The run's figure of ``probe`` (:data:`MEMORY`, :data:`CORE`)."""
        return self.bandwidth if probe is MEMORY else self.core

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "throughput": self.value, "busy": self.busy, "memory_gbs": self.bandwidth,
                "core_gflops": self.core, "allowance": self.allowance, "host_only": self.host_only}


def busy_reason(interference: Mapping[str, Any] | None, telemetry: Any = None,
                threshold: float | None = MAX_INTERFERENCE) -> str | None:
    """Why a run's windows were measured on a busy machine, or None.  ``threshold`` None: never busy.

    Other processes' CPU (or the hypervisor's steal) above ``threshold`` percent of one CPU
    counts where the machine's CPUs were saturated (a process on an idle core takes nothing
    from the case); other processes on the case's GPU always count; so does clock throttling
    for the machine's sake (thermal, power brake) in more than 10% of the samples.
    """
    if threshold is None:
        return None
    reasons = []
    if interference:
        other, steal = interference.get("other_cpu_percent", 0.0), interference.get("steal_percent", 0.0)
        capacity = 100.0 * interference.get("cpus", 1)
        used = other + steal + interference.get("own_cpu_percent", 0.0)
        if other + steal > threshold and used >= SATURATED * capacity:
            what = f"other processes used {other:.0f}% CPU"
            reasons.append(what + (f", steal {steal:.0f}%" if steal >= 1 else ""))
        if interference.get("gpu_other_processes"):
            reasons.append(f"{interference['gpu_other_processes']} other process(es) on the GPU")
    summaries = telemetry if isinstance(telemetry, list) else [telemetry] if telemetry else []
    for summary in summaries:
        for device in ((summary or {}).get("gpu") or {}).get("devices", {}).values():
            counts, samples = device.get("throttle_samples") or {}, max(1, (summary or {}).get("samples") or 1)
            seen = [r for r in THROTTLE_REASONS if counts.get(r, 0) > THROTTLE_SHARE * samples]
            if seen:
                reasons.append(f"GPU clocks throttled ({', '.join(seen)})")
    return "; ".join(dict.fromkeys(reasons)) or None


def bandwidth_reason(bandwidth: float | None, reference: float | None, whose: str,
                     max_drop: float | None = MAX_BANDWIDTH_DROP) -> str | None:
    """Why a run's memory bandwidth makes it no evidence (more than ``max_drop`` below ``reference``), or None."""
    return MEMORY.reason(bandwidth, reference, whose, max_drop)


def bandwidth_allowance(bandwidth: float | None, reference: float | None,
                        max_drop: float | None = MAX_BANDWIDTH_DROP, slope: float = 1.0) -> float:
    """How much of a run's slowness what the host took can explain: ``(reference / bandwidth) ** slope``
    where the run's probe (memory bandwidth, or core speed) measured less than the baseline's
    ``reference``, else 1 (also where either is unknown, or the probe's rule is off: ``max_drop`` None).

    A run whose probe fell by more than ``max_drop`` is busy and no evidence that the case is
    fine; within that band it still counts, but its slowness is only evidence of a regression
    beyond what the host took can explain.  ``slope`` is the most the case's throughput follows
    the probe (:attr:`HostProbe.slope`, measured: ``benchmarks/machine_drift.py --copy``): log
    img/s followed the core probe with a slope of 0.72-1.0, the memory probe with 0.13-0.5
    where nothing else ran in the machine.  A slope of 1 for the memory probe there (the rule
    before 2026-11-25) let a 20% slowdown pass where the host's memory probe read 20% low while
    its core held (docs/verdicts.md); :func:`run_figures` keeps 1 for a run beside another
    process in the machine, which costs the case more than the probe shows.
    """
    if max_drop is None or not bandwidth or not reference or bandwidth >= reference:
        return 1.0
    return (reference / bandwidth) ** slope


def host_alone(interference: Mapping[str, Any] | None, cpu_reason: str | None, host_reason: str | None,
               allowance: float) -> bool:
    """Whether a run was busy for what the host took alone (its memory bandwidth or its core), the host's
    other tenants having taken it.

    True where a host probe's rule made it busy (``host_reason``), nothing else did (``cpu_reason``
    None: no other process on its GPU, no throttling), it has an allowance against the baseline's
    probes (> 1), and no other process in the machine used more than :data:`QUIET_CPU` of one CPU
    (looked at even with the CPU rule off: a neighbour inside the machine that takes bandwidth
    also evicts the case's caches).  Such a run measured at most :attr:`RunFigure.allowed` with
    the baseline's bandwidth and core (README, "Where the spread between runs comes from").
    """
    if host_reason is None or cpu_reason is not None or allowance <= 1.0:
        return False
    return machine_quiet(interference)


def machine_quiet(interference: Mapping[str, Any] | None) -> bool:
    """No other process in the machine (nor steal) used more than :data:`QUIET_CPU` of one CPU during the run."""
    others = (interference or {}).get("other_cpu_percent", 0.0) + (interference or {}).get("steal_percent", 0.0)
    return others <= QUIET_CPU


def host_gain(figures: Sequence[RunFigure], bandwidth: float | None, core: float | None,
              max_drop: float | None = MAX_BANDWIDTH_DROP, max_core_drop: float | None = MAX_CORE_DROP) -> str | None:
    """Where the counted runs' host probes (their median) read more than the rule's drop *above* the
    baseline's figure, what the host gave them more, or None: "memory bandwidth 8.0 GB/s, 19% above the
    baseline's 6.7 GB/s".

    The allowance makes up for a host slower than the baseline's; a faster one cannot be taken off
    the other way (how much a case gains from it is the case's own: over one half hour of the
    project's 2-core VM, log img/s followed 0.34 x log GB/s + 0.86 x log GFLOP/s, another host
    0.5 x log GB/s alone), so a baseline measured in the host's slow minutes hides slowdowns in
    its fast ones.  The verdict says so.
    """
    counted = [f for f in figures if not f.busy]
    found = []
    for probe, reference, drop in ((MEMORY, bandwidth, max_drop), (CORE, core, max_core_drop)):
        values = [f.probe(probe) for f in counted if f.probe(probe)]
        if drop is None or not reference or not values:
            continue
        median = statistics.median(values)
        if median > reference * (1 + drop):
            found.append(f"{probe.what} {median:.1f} {probe.unit}, {100 * (median / reference - 1):.0f}% above "
                         f"the baseline's {reference:.1f} {probe.unit}")
    return "; ".join(found) or None


def fastest_probes(probes: Sequence[float | None]) -> tuple[float | None, str]:
    """The reference bandwidth of runs without a baseline's: the median of the fastest third of their
    probes (at least one), and its name for the message.

    Not the single fastest: the maximum of n noisy probes rises with n, so the more runs a
    session measures (a baseline being saved re-measures its busy runs), the more of them it
    would call busy.  The fastest third's median is the reference ``machine_drift.py --copy``
    measured the runs against.
    """
    fastest = sorted((p for p in probes if p), reverse=True)
    if not fastest:
        return None, ""
    top = fastest[:max(1, round(len(fastest) / 3))]
    if len(top) == 1:
        return top[0], "this case's fastest run's"
    return statistics.median(top), f"the median of this case's {len(top)} fastest runs,"


def run_figures(runs: Sequence[Mapping[str, Any]], threshold: float | None = MAX_INTERFERENCE,
                bandwidth: float | None = None, max_drop: float | None = MAX_BANDWIDTH_DROP,
                core: float | None = None, max_core_drop: float | None = MAX_CORE_DROP) -> list[RunFigure]:
    """Each run record's (:func:`pytest_dlperf.runs.measure`) median of windows, and whether it was busy.

    ``bandwidth``, ``core``: the baseline's memory bandwidth (GB/s) and core speed (GFLOP/s);
    without one, the fastest third of these runs' probes is its reference (:func:`fastest_probes`),
    so a run measured while the host's other tenants took its bandwidth or its core is no
    evidence beside one that was not.  Against the baseline's figures, each run also gets its
    :func:`bandwidth_allowance`, the largest of its probes' (against the fastest runs' it is 1:
    that reference says nothing about the machine the baseline was measured on), and a run busy
    for what the host took alone is marked :func:`host_alone`.
    """
    out = []
    rules = ((MEMORY, bandwidth, max_drop), (CORE, core, max_core_drop))
    probed = {probe.key: [(run.get("interference") or {}).get(probe.key) for run in runs] for probe, _, _ in rules}
    references = {probe.key: (baseline, "the baseline's") if baseline else fastest_probes(probed[probe.key])
                  for probe, baseline, _ in rules}
    for i, run in enumerate(runs):
        figures = [w["throughput"] for w in run.get("windows") or []]
        if not figures:
            continue
        cpu_reason = busy_reason(run.get("interference"), run.get("telemetry"), threshold)
        host_reasons = [(probe.reason(probed[probe.key][i], *references[probe.key], drop), baseline)
                        for probe, baseline, drop in rules]
        host_reason = "; ".join(r for r, _ in host_reasons if r) or None
        # Each probe's measured slope holds where the machine itself was quiet; beside another process in it the
        # case lost more than the probe shows (that process evicts its caches too: twice the cost, measured), so
        # there the allowance is the probe's whole ratio.
        quiet = machine_quiet(run.get("interference"))
        allowance = max(bandwidth_allowance(probed[probe.key][i], baseline, drop, probe.slope if quiet else 1.0)
                        for probe, baseline, drop in rules)
        # The allowance covers a probe's loss only against the baseline's figure of it: a run busy for a probe the
        # baseline kept no figure of (an older baseline without core_gflops) is no evidence either way.
        only = all(baseline for reason, baseline in host_reasons if reason) and \
            host_alone(run.get("interference"), cpu_reason, host_reason, allowance)
        out.append(RunFigure(run.get("index", len(out)), statistics.median(figures),
                             "; ".join(r for r in (cpu_reason, host_reason) if r) or None,
                             probed[MEMORY.key][i], allowance, only, probed[CORE.key][i]))
    return out


def prior_sigma(tolerance: float) -> float:
    """The spread assumed before any run is seen: the tolerance / :data:`NOISE_SIGMAS`, at least :data:`FLOOR_CV`.

    A tolerance is set (by hand, or by ``--dlperf-save-baseline`` from the measured spread,
    :mod:`.tolerance`) at 3 x the case's noise or more, so tolerance / 3 is the noise its
    author vouched for.  It weighs :data:`PRIOR_DOF` runs: a few measured runs soon outweigh it.
    """
    return max(FLOOR_CV, math.log1p(tolerance / NOISE_SIGMAS))


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The case's figure from its evidence runs, with its interval, relative to a baseline (when one)."""

    value: float  # geometric mean of the runs' medians
    low: float
    high: float
    runs: int  # evidence runs
    sigma: float  # pooled spread of log(run median)
    dof: float
    baseline: float | None = None
    baseline_runs: int = 0
    confidence: float = CONFIDENCE

    @property
    def difference(self) -> float | None:
        return None if self.baseline is None else self.value / self.baseline - 1.0

    def interval_text(self, fmt=lambda v: f"{v:.1f}") -> str:
        return f"{round(100 * self.confidence)}% CI {fmt(self.low)}-{fmt(self.high)}, {self.runs} run" + \
            ("s" if self.runs != 1 else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def pooled_sigma(logs: Sequence[float], baseline_logs: Sequence[float], tolerance: float) -> tuple[float, float]:
    """(sigma, degrees of freedom): the prior, the session's and the baseline's spreads pooled by their dof."""
    prior = prior_sigma(tolerance)
    squares, dof = PRIOR_DOF * prior ** 2, float(PRIOR_DOF)
    for sample in (logs, baseline_logs):
        if len(sample) >= 2:
            squares += (len(sample) - 1) * statistics.variance(sample)
            dof += len(sample) - 1
    return math.sqrt(squares / dof), dof


def estimate(values: Sequence[float], tolerance: float, baseline: float | None = None,
             baseline_runs: Sequence[float] = (), confidence: float = CONFIDENCE) -> Estimate:
    """The geometric mean of ``values`` (run medians) with its ``confidence`` interval.

    With a ``baseline``, the interval is that of ``mean / baseline`` (times the baseline), the
    baseline's own ``baseline_runs`` widening it as an estimate from m runs.
    """
    if not values:
        raise ValueError("no run to estimate from")
    logs = [math.log(v) for v in values]
    base_logs = [math.log(v) for v in baseline_runs if v > 0]
    sigma, dof = pooled_sigma(logs, base_logs, tolerance)
    center = statistics.fmean(logs)
    se = sigma * math.sqrt(1 / len(logs) + (1 / len(base_logs) if base_logs and baseline is not None else 0))
    from scipy import stats as scipy_stats  # here, not at the top: it costs every pytest start a second

    half = scipy_stats.t.ppf(0.5 + confidence / 2, dof) * se
    return Estimate(math.exp(center), math.exp(center - half), math.exp(center + half), len(logs), sigma, dof,
                    baseline, len(base_logs), confidence)


def decide(est: Estimate, tolerance: float) -> Decision:
    """Regression, improved or pass when the interval lies wholly on one side of a threshold; else undecided."""
    if est.baseline is None:
        return Decision.PASS
    low, high = est.baseline * (1 - tolerance), est.baseline * (1 + tolerance)
    if est.high < low:
        return Decision.REGRESSION
    if est.low > high:
        return Decision.IMPROVED
    if est.low >= low:
        return Decision.PASS
    return Decision.UNDECIDED
