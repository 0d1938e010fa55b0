"""The service that says what a case is judged against: a baseline file's entry, else the case's history, its
tolerance, the drift between sessions, its never-deciding streak and the 1-rank reference of its scaling.

:class:`References` is one per session; :meth:`References.for_case` gives a case's :class:`CaseReference`, the
figures resolved once, which its kind's ``measure`` and ``judge`` read (:mod:`.kinds`).  The tolerance is
resolved here and nowhere else: the entry's, else ``--dlperf-tolerance``, else
:data:`~pytest_dlperf.baseline.DEFAULT_TOLERANCE`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .. import baseline as baseline_mod
from .. import models
from ..cases import Case
from ..gate import tolerance as tolerance_mod
from ..gate.drift import Drift
from ..gate.verdict import ONE_RANK_DDP, PLAIN_PROCESS
from ..launch.launchers import get_launcher
from ..launch.workers import CaseError, RunParams
from ..results.case import CaseResult, Expected
from ..results.runs import Attempt
from .runner import Runner, measurer_for

if TYPE_CHECKING:
    from .history import HistoryBaselines
    from ..options import Options

#: A case's 1-rank reference for its scaling: (throughput, where it comes from, how it was measured), or None.
ScalingFigure = tuple[float, str, str | None]


@dataclasses.dataclass
class ScalingReferences:
    """The 1-rank figures a session measured for scaling (``-m gpu8`` alone), once per config."""

    figures: dict[Case, float | None] = dataclasses.field(default_factory=dict)
    errors: dict[Case, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CaseReference:
    """What one case is judged against, resolved once before it runs."""

    entry: baseline_mod.Entry | None
    #: The figure it is judged against (a file's entry, else its history), or None: no baseline.
    expected: Expected | None
    tolerance: float
    #: The drift between sessions its interval carries: the history's, where there is a store (else the prior).
    drift: Drift | None
    #: Its undecided sessions in a row before this one, where there is a history store; else None.
    streak: int | None
    #: The baseline file's step defaults.
    step_defaults: dict[str, int]
    #: A gate's minimum by baseline field (``min_scaling_efficiency``, ``min_gpu_utilization``): the entry's, else
    #: the baseline defaults', else the option's.
    minimums: dict[str, float | None]
    #: The baseline file it is judged against, if any (its hardware, for a mismatch note).
    baseline: baseline_mod.Baseline | None = None
    #: The runs of its undecided nights before this one, oldest first, for the never-deciding rule to judge together
    #: with tonight's (:mod:`pytest_dlperf.gate.nights`): against a saved baseline, with a history store; else none.
    undecided_runs: tuple[tuple[float, ...], ...] = ()
    #: The 1-rank reference of its scaling (``scaling(params)``): resolved only when asked (it may measure one).
    scaling: Callable[..., ScalingFigure | None] = dataclasses.field(default=lambda *a, **k: None, repr=False)
    #: Why its 1-rank reference could not be measured, once ``scaling`` said None.
    scaling_error: Callable[[], str] = dataclasses.field(default=lambda: "?", repr=False)
    #: The phases of its 1-rank reference, where they are known (:meth:`References.one_rank_phases`).
    one_rank_phases: Callable[[], Mapping[str, float] | None] = dataclasses.field(default=lambda: None, repr=False)

    @property
    def own_runs(self) -> tuple[float, ...]:
        """The baseline's own runs: a file entry's medians, or the history's figures (its last sessions)."""
        if self.expected is not None and self.expected.figures:
            return tuple(self.expected.figures)
        return tuple(self.entry.runs) if self.entry is not None else ()


class References:
    """What a session's cases are judged against."""

    def __init__(self, options: Options, baseline: baseline_mod.Baseline | None, runner: Runner,
                 results: list[CaseResult], *, history: HistoryBaselines | None = None,
                 history_references: HistoryBaselines | None = None):
        self.options = options
        self.runner = runner
        #: The session's results so far (its 1-rank cases are the scaling references of its N-rank ones).
        self.results = results
        self.baseline = baseline
        #: --dlperf-baseline-from-history: each case's last sessions, the baseline where a file gives none.
        self.history = history
        #: --dlperf-save-baseline with --dlperf-history: the cases' last sessions, whose host probes a baseline
        #: being saved is compared with.
        self.history_references = history_references
        self.scaling = ScalingReferences()

    def tolerance(self, entry: baseline_mod.Entry | None) -> float:
        """The entry's tolerance, else ``--dlperf-tolerance``, else the default."""
        if entry is not None and entry.tolerance is not None:
            return entry.tolerance
        return self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE

    def expected(self, entry: baseline_mod.Entry | None, unit: str, case: Case | None = None) -> Expected | None:
        """The figure a case is judged against: a baseline file's entry wins; else the case's history, if asked."""
        if entry is None or entry.unjudged:
            return self.history.expected(case, unit, self.options.tolerance) if self.history and case else None
        return entry.expected(unit, self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE)

    def gate_minimum(self, entry: baseline_mod.Entry | None, key: str, from_option: float | None) -> float | None:
        """A gate's minimum (``key``: a baseline field): the entry's, else the baseline defaults', else the option's."""
        if entry is not None and getattr(entry, key) is not None:
            return getattr(entry, key)
        if self.baseline is not None and key in self.baseline.defaults:
            return self.baseline.defaults[key]
        return from_option

    def undecidable(self, case: Case) -> str | None:
        """Where the history says this case's sessions drift too far apart for its saved baseline to pass it unchanged
        within ``--dlperf-max-runs``: one line saying so and what to run instead (before any case runs, rather than
        failing its third undecided night by surprise); else None."""
        entry = self.baseline.find(case) if self.baseline is not None else None
        runs = [v for v in (entry.runs if entry is not None and not entry.unjudged else ()) if v > 0]
        if self.history is None or len(runs) < 3:
            return None
        tol, max_runs = self.tolerance(entry), self.options.max_runs
        drift = self.history.drift(case.id, tol)
        if not drift.source.startswith("history"):  # the prior: the save already said what its runs can decide
            return None
        sigma = statistics.stdev(math.log(v) for v in runs)
        needed = tolerance_mod.runs_to_pass(sigma, len(runs), tol, drift=drift)
        if needed is not None and needed <= max_runs:
            return None
        wider = tolerance_mod.decidable_tolerance(sigma, len(runs), max_runs, drift)
        return (f"{case.id}: its sessions here drift {100 * drift.tau:.1f}% apart ({drift.source}): against its saved "
                f"baseline, {max_runs} runs cannot pass it unchanged at {100 * tol:g}%, so it will end undecided and "
                f"fail after dlperf_inconclusive_nights {self.options.inconclusive_nights} nights; run it in pairs "
                f"(--dlperf-against last-good) or ask for --dlperf-tolerance {wider:g}")

    def for_case(self, case: Case, entry: baseline_mod.Entry | None, unit: str) -> CaseReference:
        """``case``'s reference, resolved once (its scaling reference when first asked for)."""
        expected = self.expected(entry, unit, case)
        history = self.history
        drift = history.drift(case.id, expected.tolerance) if history is not None and expected else None
        opts = self.options
        # A baseline from history is made of the nights themselves: only a file's is judged against nights together.
        nights = history.undecided_runs(case.id, expected.tolerance, opts.inconclusive_nights - 1) \
            if history is not None and expected is not None and not expected.figures else ()
        return CaseReference(
            entry, expected, self.tolerance(entry), drift,
            history.inconclusive_streak(case.id, expected.tolerance if expected else None)
            if history is not None else None,
            dict(self.baseline.step_defaults) if self.baseline is not None else {},
            {"min_scaling_efficiency": self.gate_minimum(entry, "min_scaling_efficiency", opts.min_efficiency),
             "min_gpu_utilization": self.gate_minimum(entry, "min_gpu_utilization", opts.min_gpu_utilization)},
            self.baseline, nights, functools.partial(self.scaling_reference, case, entry),
            lambda: self.scaling.errors.get(case.with_gpus(1), "?"), functools.partial(self.one_rank_phases, case))

    def session_one_rank(self, case: Case) -> CaseResult | None:
        """The 1-rank case of ``case``'s config this session measured last, if any."""
        return next((r for r in reversed(self.results)
                     if r.measured and r.case.gpus == 1 and r.case.same_config(case)), None)

    def one_rank_phases(self, case: Case) -> Mapping[str, float] | None:
        """The phases of ``case``'s 1-rank reference (:meth:`scaling_reference`'s, measured now aside): this
        session's 1-rank case's, else the baseline's entry's."""
        if (result := self.session_one_rank(case)) is not None:
            return result.phases
        one_rank = self.baseline.reference(case) if self.baseline is not None else None
        return one_rank.phases if one_rank is not None else None

    def scaling_reference(self, case: Case, entry: baseline_mod.Entry | None,
                          params: RunParams) -> ScalingFigure | None:
        """The 1-rank throughput of the same config, where it comes from and how it was measured: measured
        in this session (a plain process, or a one-rank DDP job under a launcher that starts ranks), else
        the baseline's, else measured now (a plain process; ``entry``: the case's, for its CPU threads)."""
        if (result := self.session_one_rank(case)) is not None:
            return result.throughput, "this session", ONE_RANK_DDP if result.ranks else PLAIN_PROCESS
        one_rank = self.baseline.reference(case) if self.baseline is not None else None
        if one_rank is not None:
            return one_rank.throughput, "baseline", None
        return self.measured_reference(case, params, entry)

    def measured_reference(self, case: Case, params: RunParams,
                           entry: baseline_mod.Entry | None = None) -> ScalingFigure | None:
        """No 1-rank figure in the session or the baseline (``-m gpu8`` alone): measure one.

        Once per config and session, as a single local process with the case's step counts;
        it is not a test of its own, on as many CPU threads as a 1-rank case of the case's entry gets
        (:meth:`~.runner.Runner.cpu_threads`).  A reference that cannot be measured leaves the case
        without scaling figures, and says so.
        """
        runner = self.runner
        one = runner.searches.at_chosen_batch(case.with_gpus(1), runner.device)
        references = self.scaling
        cpu = runner.cpu_threads(one, entry)
        threads = cpu.threads if cpu is not None else None
        if one not in references.figures:
            spec = models.get_model_spec(one.model)
            try:
                one_run = dataclasses.replace(params, runs=1, launcher="local", cpu_threads=threads)
                runs = measurer_for(spec)(one, spec, one_run, runner.case_dir(case) / "reference",
                                          get_launcher("local"))
                references.figures[one] = Attempt.from_runs(runs, spec.unit).summary.median
            except CaseError as exc:
                references.figures[one] = None
                references.errors[one] = exc.message.splitlines()[0]
        figure = references.figures[one]
        return (figure, "measured for scaling", PLAIN_PROCESS) if figure is not None else None
