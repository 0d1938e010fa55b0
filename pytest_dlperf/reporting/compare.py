"""``dlperf compare NEW.json OLD.json``: two results files, case by case, judged as the gate judges a session.

For each case in both files, NEW's run figures are judged against OLD's as a session's runs are against a saved
baseline (:mod:`pytest_dlperf.gate.evidence`): the geometric means, the 98% interval of their ratio with both
files' runs and the prior drift between two sessions (:func:`pytest_dlperf.gate.drift.prior`), and the decision
at ``--tolerance`` (one look: the files are whole).  A case's runs are those its evidence counted (not busy, not
cut short); a file without them (a published figure, an older file) gives its one figure, and the interval then
rests on the prior spread.  Cases in one file only are listed as such.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from ..gate import evidence as ev
from ..gate.drift import prior
from ..gate.format import fmt_signed, fmt_value
from ..results.case import CaseResult

#: The decisions in words: NEW against OLD.
WORDS = {ev.Decision.REGRESSION: "slower", ev.Decision.IMPROVED: "faster", ev.Decision.PASS: "same",
         ev.Decision.UNDECIDED: "undecided"}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One case of the two files: its figures, and (in both, measured) the estimate and decision."""

    case_id: str
    unit: str | None
    new: float | None
    old: float | None
    estimate: ev.Estimate | None = None
    decision: ev.Decision | None = None

    @property
    def word(self) -> str:
        if self.decision is not None:
            return WORDS[self.decision]
        return "only in OLD" if self.new is None else "only in NEW" if self.old is None else "not measured"


def runs_of(result: CaseResult) -> list[float]:
    """The run figures a case's evidence counted; else its one figure; else none."""
    if result.evidence is not None:
        counted = [f.value for f in result.evidence.counted if f.value > 0]
        if counted:
            return counted
    figure = result.throughput
    return [figure] if figure is not None and math.isfinite(figure) and figure > 0 else []


def compare(new: Sequence[CaseResult], old: Sequence[CaseResult], tolerance: float) -> list[Comparison]:
    """Every case of either file, in NEW's order then OLD's."""
    olds = {r.id: r for r in old}
    news = {r.id: r for r in new}
    out = []
    for case_id in [*news, *(i for i in olds if i not in news)]:
        a, b = news.get(case_id), olds.get(case_id)
        runs_a, runs_b = (runs_of(a) if a else []), (runs_of(b) if b else [])
        unit = (a or b).unit
        figure_a = statistics.geometric_mean(runs_a) if runs_a else None
        figure_b = statistics.geometric_mean(runs_b) if runs_b else None
        if not runs_a or not runs_b:
            out.append(Comparison(case_id, unit, figure_a, figure_b))
            continue
        est = ev.estimate(runs_a, tolerance, figure_b, runs_b if len(runs_b) > 1 else (), drift=prior(tolerance))
        out.append(Comparison(case_id, unit, figure_a, figure_b, est, ev.decide(est, tolerance)))
    return out


def table(comparisons: Sequence[Comparison], tolerance: float) -> list[str]:
    """The comparisons as a plain-text table, one line a case."""
    head = ("case", "NEW", "OLD", "NEW/OLD", "98% CI", f"at {100 * tolerance:g}%")
    rows = [head]
    for c in comparisons:
        ratio = interval = "-"
        if c.estimate is not None:
            ratio = fmt_signed(c.estimate.difference)
            low, high = c.estimate.relative()
            interval = f"{fmt_signed(low, '')}..{fmt_signed(high)}"
        rows.append((c.case_id, "-" if c.new is None else f"{fmt_value(c.new)} {c.unit or ''}".strip(),
                     "-" if c.old is None else fmt_value(c.old), ratio, interval, c.word))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return [" | ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
