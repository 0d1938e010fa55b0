"""What a saved baseline's measured noise lets its tolerance decide.

A tolerance is what the user asks for (``--dlperf-tolerance``, default 5%); the noise is what the
verdict's interval is for (:mod:`pytest_dlperf.gate.evidence`).  ``--dlperf-save-baseline`` (and the
baseline a session records for a machine that had none) keeps each case's counted runs (``runs``),
so later verdicts pool their spread, and saves the tolerance asked for.  Where the runs varied so
much that a later session could not decide an unchanged case within ``--dlperf-max-runs``, the save
says so, with the runs it would take and the tolerance this host can decide (:class:`Noisy`): the
threshold never moves by itself.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from .evidence import CONFIDENCE, Drift, ruled_out, standard_error, t_quantile
from .stats import summarize

#: The widest tolerance a baseline takes (the schema takes less than 1).
MAX_SAVED_TOLERANCE = 0.9


def _half(sigma: float, baseline_runs: int, runs: int, tolerance: float, drift: Drift | None = None) -> float:
    """The interval's half-width (log scale) of ``runs`` session runs against a saved baseline of ``baseline_runs``,
    runs varying ``sigma``, the drift between sessions ``drift`` (None: the prior's,
    :func:`pytest_dlperf.gate.drift.prior`)."""
    from .drift import prior

    dof = max(1, baseline_runs - 1 + runs - 1)
    se, dof = standard_error(sigma, dof, runs, max(1, baseline_runs), drift or prior(tolerance), 2.0)
    return t_quantile(0.5 + CONFIDENCE / 2, dof) * se


def runs_to_pass(sigma: float, baseline_runs: int, tolerance: float, limit: int = 200,
                 drift: Drift | None = None) -> int | None:
    """About how many runs a session needs to pass an unchanged case (its estimate on the baseline's figure)
    against a baseline of ``baseline_runs`` runs, where runs vary ``sigma`` (the standard deviation of
    log(run figure)) and sessions drift as ``drift`` (None: the prior) says; None where no number of runs up to
    ``limit`` would."""
    margin = -math.log(1 - ruled_out(tolerance))
    for n in range(1, limit + 1):
        if _half(sigma, baseline_runs, n, tolerance, drift) <= margin:
            return n
    return None


def decidable_tolerance(sigma: float, baseline_runs: int, runs: int, drift: Drift | None = None) -> float:
    """The least tolerance, in whole percents, at which ``runs`` session runs pass an unchanged case (sessions
    drifting as ``drift``, None: the prior, says)."""
    for percent in range(1, round(100 * MAX_SAVED_TOLERANCE)):
        tolerance = percent / 100
        if _half(sigma, baseline_runs, runs, tolerance, drift) <= -math.log(1 - ruled_out(tolerance)):
            return tolerance
    return MAX_SAVED_TOLERANCE


@dataclasses.dataclass(frozen=True)
class Noisy:
    """A saved case whose runs varied more than its tolerance can resolve within the run budget."""

    case_id: str
    cv: float  # between the counted runs
    runs: int  # the baseline's counted runs
    tolerance: float
    needed: int | None  # runs a session needs to pass an unchanged case; None: no number would
    max_runs: int
    decidable: float  # the least tolerance max_runs can decide
    #: The spread (CV) of the host's own speed between the runs, as the controller's probe read it (None: fewer than
    #: 3 readings).  On the Xeon VM whose save read 17%, 2 of 40 unchanged sessions against it failed, in minutes
    #: when the whole host ran slow (benchmarks/results/2026-11-30-issue-53-stretch.md).  Named as the host's move
    #: from the tolerance up; under it, the runs' spread is more likely the case's own.
    host_cv: float | None = None

    def line(self) -> str:
        would = (f"an unchanged case needs about {self.needed} runs to pass" if self.needed is not None else
                 "no number of runs would pass an unchanged case")
        host = ""
        if self.host_cv is not None and self.host_cv >= self.tolerance:
            host = (f"; the host itself moved {100 * self.host_cv:.1f}% (CV, read between runs by a probe of its own): "
                    f"in minutes when it runs slow, unchanged code can fail")
        elif self.host_cv is not None:
            host = (f"; the host itself read steadier ({100 * self.host_cv:.1f}% CV, read between runs by a probe of "
                    f"its own): look at the case's own noise first")
        return (f"{self.case_id}: its {self.runs} runs varied {100 * self.cv:.1f}% (CV): too noisy for "
                f"{round(100 * self.tolerance)}% here: {would} (--dlperf-max-runs {self.max_runs}), so expect "
                f"inconclusive verdicts{host}; {self.max_runs} runs decide a tolerance of "
                f"{round(100 * self.decidable)}%: save it on a quieter machine, with more runs (--dlperf-runs), ask "
                f"for --dlperf-tolerance {self.decidable:g}, or gate with pairs (--dlperf-against)")


def noisy(case_id: str, runs: Sequence[float], tolerance: float, max_runs: int,
          host_runs: Sequence[float] = ()) -> Noisy | None:
    """A :class:`Noisy` for a case saved from ``runs`` (its counted runs' figures) at ``tolerance``, or None where
    a session decides an unchanged case within ``max_runs`` (or there are fewer than 3 runs to tell).
    ``host_runs``: the controller's probe readings after those runs (:mod:`.host`), for their spread."""
    values = [v for v in runs if v > 0]
    if len(values) < 3:
        return None
    sigma = statistics.stdev(math.log(v) for v in values)
    needed = runs_to_pass(sigma, len(values), tolerance)
    if needed is not None and needed <= max_runs:
        return None
    hosts = [v for v in host_runs if v > 0]
    host_cv = summarize(hosts).cv if len(hosts) >= 3 else None
    return Noisy(case_id, summarize(values).cv, len(values), tolerance, needed, max_runs,
                 decidable_tolerance(sigma, len(values), max_runs), host_cv)


def summary_line(count: int, noisy_cases: list[Noisy], tolerance: float) -> str:
    """One line: how many saved cases are too noisy for their tolerance here."""
    return (f"{len(noisy_cases)} of {count} saved case(s) varied too much for the {round(100 * tolerance)}% asked "
            "for to be decided within the run budget: the tolerance stays as asked; their verdicts may end "
            "inconclusive (each line above says what would decide them)")
