"""Runs as evidence: the case's figure from its runs' figures (:mod:`.figures`), with its interval, and the decision.

A run is one fresh worker process.  Its windows are correlated (same process, same allocation, same neighbours), so the
*runs* are the independent samples and a run's figure is the median of its windows (:class:`~.figures.RunFigure`); a run
measured on a busy machine is no evidence either way (:func:`~.figures.busy_reason`).

:func:`estimate` gives the case's figure relative to its baseline with a confidence interval, on the log scale
(throughput is a rate: slowdowns multiply, and its spread is relative):

* the estimate is the geometric mean of the evidence runs' medians;
* the spread ``sigma`` (the standard deviation of ``log(run median)``) is pooled from the session's runs (n - 1 degrees
  of freedom) and the baseline's own runs (m - 1) when it kept three or more (a saved baseline keeps
  :data:`pytest_dlperf.gate.sequential.SAVE_RUNS`); a baseline without its runs (a published figure) adds a prior,
  :func:`prior_sigma`, worth :data:`PRIOR_DOF` runs, so that one or two runs never give a spread of zero;
* the standard error of ``log(estimate / baseline)`` is ``sqrt(sigma^2 (1/n + 1/m) + k tau^2)`` (the baseline figure is
  itself an estimate from m runs; a published figure, m unknown, counts as exact: its tolerance covers it; ``tau`` the
  drift between sessions, :mod:`.drift`, ``k`` the session offsets in the comparison: 2 against a one-session baseline),
  and the interval is Student's t at Welch-Satterthwaite's degrees of freedom, :data:`CONFIDENCE` two-sided.

:func:`decide`, against the threshold ``baseline x (1 - tolerance)``:

* **regression** when the interval's top at the look's boundary (:func:`t_boundary`, :mod:`.looks`: the looks of a case
  spend 1% together) is below it;
* **improved** when the whole interval is above ``baseline x (1 + tolerance)``;
* **pass** when the whole interval is above it, or, on a noisy host, when the estimate is within :data:`WITHIN` x the
  tolerance of the baseline and the interval rules out :data:`RULED_OUT` x the tolerance (10% at 5%);
* else undecided, and the session measures another run (:mod:`.sequential`).

What the runs showed is one :class:`Evidence`: every run's figure, the estimate, the decision and why measuring stopped
(:class:`StopReason`).  The operating characteristic of these rules under a known noise:
``benchmarks/verdict_simulation.py``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..protocol import ValueEnum
from .figures import HOST_PROBES, RunFigure
from .stats import excess_variance, squares

#: Two-sided confidence of the interval; each decision is a one-sided test at (1 - CONFIDENCE) / 2 = 1%.
CONFIDENCE = 0.98
#: A tolerance set by hand is taken to be about this many times the noise its author expects: the prior spread
#: of a baseline that kept no runs (:func:`prior_sigma`).
NOISE_SIGMAS = 3
#: Weight of the prior spread, in runs' worth of degrees of freedom (only without the baseline's own runs).
PRIOR_DOF = 3
MEASURED_SPREAD_RUNS = 3  # the baseline runs from which its measured spread replaces the prior
MAX_DOF = 1e6  # degrees of freedom beyond which t is the normal (and a results document keeps a number)
#: A pass whose interval reaches below the threshold rules out this many tolerances (its promise's slowdown), its
#: estimate within WITHIN x the tolerance.  Against a save 4% low (simulated), twice the tolerance passed 44% with the
#: estimate only above the threshold, 9% so, 1% with no such pass, which left 59% of unchanged cases undecided at 5%.
RULED_OUT, WITHIN = 2.0, 0.5
#: The least spread (CV between runs) the interval assumes, whatever the runs show.
FLOOR_CV = 0.01


class Decision(ValueEnum):
    REGRESSION = "regression"
    PASS = "pass"
    IMPROVED = "improved"
    UNDECIDED = "undecided"


def prior_sigma(tolerance: float) -> float:
    """The spread assumed before any run is seen: the tolerance / :data:`NOISE_SIGMAS`, at least :data:`FLOOR_CV`.

    Only where the baseline kept fewer than :data:`MEASURED_SPREAD_RUNS` runs (a published figure):
    a tolerance set by hand is at least about 3 x the noise its author expects.  It weighs
    :data:`PRIOR_DOF` runs: a few measured runs soon outweigh it.
    """
    return max(math.log1p(FLOOR_CV), math.log1p(tolerance / NOISE_SIGMAS))


@dataclasses.dataclass(frozen=True)
class Drift:
    """How far a host's level moves between sessions: ``tau``, the standard deviation of a session's offset on
    the log scale (its runs all share it), with its degrees of freedom (None: a stated prior, taken as known)
    and where it comes from (:mod:`pytest_dlperf.gate.drift`)."""

    tau: float
    dof: float | None = None
    source: str = "prior"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Drift:
        return cls(data["tau"], data.get("dof"), data.get("source", "prior"))

    def widened(self, variance: float) -> Drift:
        """This drift with ``variance`` more in ``tau^2`` (a stretch of the host, :func:`.stats.excess_variance`)."""
        return dataclasses.replace(self, tau=math.sqrt(self.tau ** 2 + variance)) if variance > 0 else self


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
    se: float = 0.0  # the standard error of log(value / baseline), the drift between sessions in it
    tau: float = 0.0  # the drift between sessions it assumed (Drift.tau), a stretch of the host in it
    offsets: float = 0.0  # session offsets in se: 1 (the session's), 2 (and a one-session baseline's)

    @property
    def difference(self) -> float | None:
        return None if self.baseline is None else self.value / self.baseline - 1.0

    def relative(self) -> tuple[float, float] | None:
        """The interval relative to the baseline (``-0.11, -0.074``), or None without one."""
        if self.baseline is None:
            return None
        return self.low / self.baseline - 1.0, self.high / self.baseline - 1.0

    def bound(self, quantile: float) -> float:
        """The interval's top at ``quantile`` (t units) standard errors: ``value x exp(quantile x se)``."""
        return self.value * math.exp(min(700.0, quantile * self.se))  # a first look at 1 dof: t near 10^4

    def interval_text(self, fmt=lambda v: f"{v:.1f}") -> str:
        return f"{round(100 * self.confidence)}% CI {fmt(self.low)}-{fmt(self.high)}, {self.runs} run" + \
            ("s" if self.runs != 1 else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Estimate:
        """An estimate as a results document keeps it (a figure alone, as a test gives one, is its own interval)."""
        value = data["value"]
        return cls(value, data.get("low", value), data.get("high", value), data.get("runs", 1), data.get("sigma", 0.0),
                   data.get("dof", 0.0), data.get("baseline"), data.get("baseline_runs", 0),
                   data.get("confidence", CONFIDENCE), data.get("se", 0.0), data.get("tau", 0.0),
                   data.get("offsets", 0.0))


def pooled_sigma(logs: Sequence[float], baseline_logs: Sequence[float], tolerance: float,
                 prior_scale: float = 1.0, more: Sequence[Sequence[float]] = ()) -> tuple[float, float]:
    """(sigma, dof): the spreads of the session's, ``more`` sessions' (:mod:`.nights`) and the baseline's runs pooled
    by their dof, with the prior (:func:`prior_sigma` x ``prior_scale``: sqrt(2) for a ratio of two runs) where the
    baseline kept fewer than :data:`MEASURED_SPREAD_RUNS` runs; never below :data:`FLOOR_CV`."""
    total, dof = squares((logs, *more, baseline_logs))
    if len(baseline_logs) < MEASURED_SPREAD_RUNS:
        total, dof = total + PRIOR_DOF * (prior_scale * prior_sigma(tolerance)) ** 2, dof + PRIOR_DOF
    return max(math.log1p(FLOOR_CV), math.sqrt(total / dof)), float(dof)


def standard_error(sigma: float, dof: float, runs: int, baseline_runs: int, drift: Drift | None,
                   offsets: float) -> tuple[float, float]:
    """(se, dof) of ``log(session mean / baseline)``: ``sqrt(sigma^2 (1/n + 1/m) + offsets x tau^2)``, its
    degrees of freedom by Welch-Satterthwaite from sigma's and tau's (a prior tau counts as known)."""
    within = sigma ** 2 * (1 / runs + (1 / baseline_runs if baseline_runs else 0))
    between = offsets * drift.tau ** 2 if drift is not None else 0.0
    if between <= 0:
        return math.sqrt(within), dof
    parts = within ** 2 / dof + (between ** 2 / drift.dof if drift.dof else 0.0)
    return math.sqrt(within + between), min(MAX_DOF, (within + between) ** 2 / parts)


def estimate(values: Sequence[float], tolerance: float, baseline: float | None = None,
             baseline_runs: Sequence[float] = (), confidence: float = CONFIDENCE, drift: Drift | None = None,
             offsets: float = 2.0) -> Estimate:
    """The geometric mean of ``values`` (run medians) with its ``confidence`` interval.

    With a ``baseline``, the interval is that of ``mean / baseline`` (times the baseline), the
    baseline's own ``baseline_runs`` widening it as an estimate from m runs, and ``drift`` (the
    between-session term) by ``offsets`` session offsets: 2 for a baseline that is one session's
    figure (the session's offset and the baseline's), 1 for one whose runs are sessions already (a
    baseline from history, whose spread carries the offsets).  Where the baseline's runs spread significantly more
    (:func:`.stats.excess_variance`), the difference is the stretch of a host's moves these sat in: once."""
    if not values:
        raise ValueError("no run to estimate from")
    logs = [math.log(v) for v in values]
    base_logs = [math.log(v) for v in baseline_runs if v > 0] if baseline is not None else []
    sigma, dof = pooled_sigma(logs, base_logs, tolerance)
    drift = None if baseline is None else drift
    if drift is not None and offsets >= 2:  # its stretch counts once among the offsets
        drift = drift.widened(excess_variance(base_logs, [logs]) / offsets)
    center = statistics.fmean(logs)
    se, dof = standard_error(sigma, dof, len(logs), len(base_logs), drift, offsets)
    half = t_quantile(0.5 + confidence / 2, dof) * se
    return Estimate(math.exp(center), math.exp(center - half), math.exp(center + half), len(logs), sigma, dof,
                    baseline, len(base_logs), confidence, se, drift.tau if drift is not None else 0.0,
                    offsets if drift is not None else 0.0)


def t_quantile(q: float, dof: float) -> float:
    """Student's t quantile: ``scipy.stats.t.ppf(q, dof)``, through the special function it calls
    (``scipy.special.stdtrit``): importing ``scipy.special`` alone costs a session a fifth of
    ``scipy.stats``'s time (0.23 against 0.65 s here), and it is imported here, not at the top."""
    from scipy import special

    if not math.isfinite(dof) or dof > MAX_DOF:
        return float(special.ndtri(q))
    return float(special.stdtrit(dof, q))


#: The one-sided level of a regression over all the looks of a case together (:mod:`.looks`).
ALPHA = (1 - CONFIDENCE) / 2


def t_boundary(look: int, looks: int, dof: float, alpha: float = ALPHA,
               fractions: Sequence[float] | None = None) -> float:
    """The regression boundary of look ``look`` of ``looks`` (:func:`pytest_dlperf.gate.looks.boundary`, in
    standard-normal units; with ``fractions``, the information fractions of looks 1 to ``look``:
    :func:`~pytest_dlperf.gate.looks.boundary_at`) in Student's t units at ``dof``: the t quantile of the same
    tail probability."""
    from scipy import special

    from .looks import boundary, boundary_at

    z = boundary_at(fractions, alpha) if fractions else boundary(look, looks, alpha)
    return -t_quantile(float(special.ndtr(-z)), dof)


def information_fractions(est: Estimate, look: int, looks: int) -> list[float]:
    """The share of the planned information each look from the first to ``look`` has: ``V_K / V_j``, with
    ``V_n = sigma^2 (1/n + 1/m) + offsets tau^2`` the variance of ``log(mean / baseline)`` after ``n`` runs
    (this estimate's sigma, baseline runs and drift; look ``j`` is ``est.runs - (look - j)`` runs, look
    ``looks`` the plan's last).  A baseline's runs and the drift do not shrink as runs come: the first looks
    hold more of the evidence than ``j / K`` says, and the looks are correlated by them."""
    def variance(runs: int) -> float:
        return est.sigma ** 2 * (1 / runs + (1 / est.baseline_runs if est.baseline_runs else 0)) \
            + est.offsets * est.tau ** 2

    first = max(1, est.runs - look + 1)  # a look past the runs counted (a caller's slip) starts at one run
    final = variance(max(est.runs, first + looks - 1))
    return [final / variance(first + j) for j in range(look)]


def ruled_out(tolerance: float) -> float:
    """The slowdown a pass must rule out where its interval reaches below the threshold: :data:`RULED_OUT` x the
    tolerance (10% at 5%), at most 90%."""
    return min(RULED_OUT * tolerance, 0.9)


def near(est: Estimate, tolerance: float) -> bool:
    """Whether the estimate lies within :data:`WITHIN` x the tolerance of its baseline (for the second pass)."""
    return est.value >= est.baseline * (1 - WITHIN * tolerance)


def rules_out(est: Estimate, tolerance: float) -> bool:
    """Whether the interval rules out a slowdown of :func:`ruled_out` (the second pass's other condition)."""
    return est.low >= est.baseline * (1 - ruled_out(tolerance))


def decide(est: Estimate, tolerance: float, *, lower_is_better: bool = False, look: int = 1,
           looks: int = 1, spend_pass: bool = False) -> Decision:
    """Regression when the interval's top at the look's boundary lies below the threshold, improved when the
    whole interval lies above the upper one; pass when it lies above the lower one, or the estimate lies within
    :data:`WITHIN` x the tolerance of the baseline and the interval rules out :func:`ruled_out`; else undecided.

    ``spend_pass`` (an A/B case, :mod:`.paired`): the second pass allows for a drift between sessions that a stored
    baseline cannot see and interleaved pairs cancel, so a pass needs the whole interval above the threshold at the
    look's boundary: a pass is spent over the looks as a regression is (issue 53).

    ``look`` of ``looks``: the regression's boundary is that of the look at its information fraction
    (:func:`information_fractions`, :func:`t_boundary`: the looks of a case spend :data:`ALPHA` together); one look
    of one is the interval's own top (1% one-sided).

    ``lower_is_better`` (a time to target, :mod:`pytest_dlperf.convergence.verdict`): the thresholds swap
    sides, a regression being the whole interval above ``baseline x (1 + tolerance)``; a pass needs the whole
    interval below it (a case's seeds are all its runs: there is no further run to wait for).
    """
    if est.baseline is None:
        return Decision.PASS
    low, high = est.baseline * (1 - tolerance), est.baseline * (1 + tolerance)
    if lower_is_better:
        if est.low > high:
            return Decision.REGRESSION
        if est.high < low:
            return Decision.IMPROVED
        return Decision.PASS if est.high <= high else Decision.UNDECIDED
    spent = t_boundary(look, looks, est.dof, fractions=information_fractions(est, look, looks)) if est.se > 0 \
        and looks > 1 else None
    top = est.bound(spent) if spent is not None else est.high
    bottom = est.bound(-spent) if spent is not None and spend_pass else est.low
    if top < low:
        return Decision.REGRESSION
    if est.low > high:
        return Decision.IMPROVED
    if bottom >= low or (not spend_pass and near(est, tolerance) and rules_out(est, tolerance)):
        return Decision.PASS
    return Decision.UNDECIDED


def runs_to_decide(est: Estimate, tolerance: float, limit: int = 100) -> int | None:
    """About how many evidence runs would decide an undecided case with this estimate and spread: the fewest n
    whose interval (the same sigma and dof) would clear the threshold on the estimate's side of it; None
    where no number of runs would, the baseline's own runs being too few (or no baseline)."""
    if est.baseline is None:
        return None
    threshold = est.baseline * (1 - tolerance)
    # The interval's top must come below the threshold, or its bottom above it (or above ruled_out(), the estimate
    # being near enough the baseline).
    margin = abs(math.log(threshold / est.value))
    if near(est, tolerance):
        margin = max(margin, math.log(est.value / (est.baseline * (1 - ruled_out(tolerance)))))
    if margin <= 0:
        return None
    q = t_quantile(0.5 + est.confidence / 2, est.dof)
    rest = ((margin / q) ** 2 - est.offsets * est.tau ** 2) / est.sigma ** 2 \
        - (1 / est.baseline_runs if est.baseline_runs else 0)
    if rest <= 1 / limit / 2:
        return None
    needed = math.ceil(1 / rest)
    return needed if needed <= limit else None


#: How often an undecided case's runs would have caught the slowdown its message names (:func:`could_catch`).
CAUGHT_POWER = 0.9


def could_catch(est: Estimate, tolerance: float) -> float | None:
    """The smallest slowdown (0.13: 13% below the baseline) that runs like these would have failed
    :data:`CAUGHT_POWER` of the time: the threshold less the one-sided 1% quantile and the power's normal quantile
    times the standard error.  What an INCONCLUSIVE case says it ruled in; None without a baseline."""
    if est.baseline is None or est.se <= 0:
        return None
    z = t_quantile(0.5 + est.confidence / 2, est.dof) + statistics.NormalDist().inv_cdf(CAUGHT_POWER)
    return 1.0 - (1.0 - tolerance) * math.exp(-z * est.se)


class StopReason(ValueEnum):
    """Why a case's runs stopped (:func:`pytest_dlperf.gate.sequential.measure_until_decided`)."""

    DECIDED = "decided"
    MAX_RUNS = "max-runs"  # --dlperf-max-runs
    TIME_BUDGET = "time budget"  # the removed dlperf_max_seconds: in results written before 0.4.0 only
    BUSY = "busy"  # BUSY_RUNS busy runs in a row
    FAR_OFF = "far-off"  # far.FAR_RUNS runs in a row cut short, far off the baseline (pytest_dlperf.gate.far)
    HOST_MOVED = "host moved"  # the host moved since the save, and the two ways of judging contradict (gate.host)


@dataclasses.dataclass
class Evidence:
    """What a case's runs showed: every run's figure, the estimate from the evidence runs and the decision."""

    figures: list[RunFigure]
    estimate: Estimate | None  # from the runs that are evidence; None when every run was busy
    decision: Decision
    stopped: StopReason
    busy_counted: bool = False  # the busy runs are in the estimate: a pass that holds even with them
    #: What the counted runs' host probes say against the baseline's (:func:`~.figures.probe_notes`): notes only.
    probes: list[str] = dataclasses.field(default_factory=list)
    #: A regression shown by fewer evidence runs than it needs when the budget ended (it fails, "not confirmed").
    unconfirmed: bool = False
    moved: float | None = None  # the host's speed over the save's where it moved, judged both ways (:mod:`.host`)

    @property
    def busy(self) -> list[RunFigure]:
        return [f for f in self.figures if f.busy]

    @property
    def counted(self) -> list[RunFigure]:  # the evidence: not measured on a busy machine, nor cut short far off
        return [f for f in self.figures if not f.busy and not f.far]

    @property
    def far(self) -> list[RunFigure]:  # the runs cut short far off the baseline (.far)
        return [f for f in self.figures if f.far]

    @property
    def busy_estimate(self) -> float | None:  # the median of the busy runs, shown when no run was evidence
        return statistics.median([f.value for f in self.busy]) if self.busy else None

    def probe_median(self, key: str, *, busy_too: bool = False) -> float | None:
        """The median host probe ``key`` (``memory_gbs``, ``core_gflops``) of the counted runs (with ``busy_too``,
        of all of them), to 3 decimals; None where none probed."""
        probe = next(p for p in HOST_PROBES if p.key == key)
        readings = [f.probe(probe) for f in (self.figures if busy_too else self.counted) if f.probe(probe)]
        return round(statistics.median(readings), 3) if readings else None

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision.value, "stopped": StopReason(self.stopped).value,
                "estimate": None if self.estimate is None else self.estimate.to_dict(),
                "busy_counted": self.busy_counted, "runs": [f.to_dict() for f in self.figures],
                "probes": list(self.probes), "unconfirmed": self.unconfirmed,
                **({"moved": self.moved} if self.moved is not None else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        estimate = data.get("estimate")
        return cls([RunFigure.from_dict(r) for r in data.get("runs") or []],
                   Estimate.from_dict(estimate) if estimate else None,
                   Decision(data.get("decision", Decision.UNDECIDED.value)),
                   StopReason(data.get("stopped", StopReason.DECIDED.value)), bool(data.get("busy_counted")),
                   list(data.get("probes") or []), bool(data.get("unconfirmed")), moved=data.get("moved"))
