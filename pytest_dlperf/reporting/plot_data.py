"""The plots' data: what each ``--dlperf-plot`` PNG shows, worked out from typed records alone.

Pure functions of :class:`~pytest_dlperf.results.case.CaseResult` lists, no matplotlib, so they
can be tested and reused without drawing anything (:mod:`pytest_dlperf.reporting.plots`
draws them):

- :func:`scaling_plots`: throughput vs GPUs, one :class:`ScalingPlot` per model x precision,
  a :class:`ScalingLine` per batch size and settings, with the windows' spread, the 1-GPU
  reference of the ideal line, the baseline's figures and the scaling efficiency; a
  configuration measured on one GPU only is left out, with a note;
- :func:`comparison_plots`: measured vs baseline, one :class:`ComparisonPlot` per unit, a
  :class:`Bar` per case with its baseline, tolerance band, difference and verdict;
- :func:`left_out_note`: the cases no plot shows (not measured: error, skipped, remote,
  data-only), named in one line.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..cases import Case
from ..results.case import CaseResult, Status


def slug(text: str) -> str:
    """A safe, stable file-name part: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.") or "x"


def plotted(results: Iterable[CaseResult]) -> list[CaseResult]:
    """The cases the plots show, the measured ones (:attr:`CaseResult.measured`), in the order they ran."""
    return [r for r in results if r.measured]


def left_out_note(results: Iterable[CaseResult]) -> str | None:
    """One line naming the cases no plot shows (error, skipped, remote, data-only), or None."""
    left = [r for r in results if not r.measured]
    if not left:
        return None
    return "left out of the plots (no throughput): " + ", ".join(
        f"{r.id} ({r.verdict.value if r.verdict is not None else 'unfinished'})" for r in left)


def _spread(result: CaseResult) -> tuple[float | None, float | None]:
    """The (min, max) of the case's windows, or (None, None) without statistics."""
    stats = result.stats or {}
    return stats.get("min"), stats.get("max")


def _config_label(case: Case) -> str:
    """How a configuration reads in a legend: ``bs256``, ``bs64 img160``."""
    return " ".join([f"bs{case.batch_size}", *case.settings_parts])


# --------------------------------------------------------------------------- throughput vs GPUs


@dataclasses.dataclass(frozen=True)
class Point:
    """One measured case on a scaling line."""

    gpus: int
    throughput: float
    low: float | None = None  # the slowest window
    high: float | None = None  # the fastest window
    efficiency: float | None = None  # speedup / gpus, for gpus > 1


@dataclasses.dataclass(frozen=True)
class ScalingLine:
    """One configuration (batch size and settings) of a model x precision over GPU counts."""

    label: str
    points: tuple[Point, ...]
    reference: float | None  # the 1-GPU figure the ideal line starts from
    reference_source: str | None  # "this session", "baseline" or "measured for scaling"
    baseline: tuple[tuple[int, float], ...] = ()  # (gpus, throughput) where the baseline has a figure

    def ideal(self, counts: Iterable[int]) -> list[tuple[int, float]]:
        """Linear scaling from the 1-GPU figure at the given GPU counts; none without it."""
        if self.reference is None:
            return []
        return [(n, self.reference * n) for n in counts]

    @property
    def gpu_counts(self) -> list[int]:
        return sorted({p.gpus for p in self.points} | {g for g, _ in self.baseline})


@dataclasses.dataclass(frozen=True)
class ScalingPlot:
    """The throughput-vs-GPUs plot of one model x precision."""

    model: str
    precision: str
    unit: str
    lines: tuple[ScalingLine, ...]

    @property
    def filename(self) -> str:
        return f"throughput-vs-gpus-{slug(self.model)}-{slug(self.precision)}.png"

    @property
    def title(self) -> str:
        config = f" {self.lines[0].label}" if len(self.lines) == 1 else ""
        return f"{self.model} {self.precision}{config}: throughput vs GPUs"

    @property
    def gpu_counts(self) -> list[int]:
        """Every GPU count on the plot, 1 (the ideal line's start) included."""
        return sorted({1}.union(*(line.gpu_counts for line in self.lines)))


def _reference(results: Sequence[CaseResult]) -> tuple[float | None, str | None]:
    """A configuration's 1-GPU figure: its 1-rank case of this session, else a recorded scaling reference."""
    for result in results:
        if result.case.gpus == 1:
            return result.throughput, "this session"
    for result in results:
        if result.scaling is not None:
            return result.scaling.reference, result.scaling.reference_source
    return None, None


def _point(result: CaseResult, reference: float | None) -> Point:
    """A measured case as a point, with its efficiency as recorded (else from the reference)."""
    gpus, value = result.case.gpus, result.throughput
    efficiency = None
    if result.scaling is not None:
        efficiency = result.scaling.efficiency
    elif gpus > 1 and reference:
        efficiency = value / (reference * gpus)
    return Point(gpus, value, *_spread(result), efficiency=efficiency)


def _baseline_points(results: Sequence[CaseResult], reference: float | None,
                     source: str | None) -> tuple[tuple[int, float], ...]:
    """(gpus, baseline throughput) of the cases that have one, and the baseline's 1-GPU reference."""
    points = {r.case.gpus: r.baseline.throughput for r in results if r.baseline is not None}
    if source == "baseline" and reference is not None:
        points.setdefault(1, reference)
    return tuple(sorted(points.items()))


def scaling_line(results: Sequence[CaseResult]) -> ScalingLine:
    """The line of one configuration from its measured cases (any GPU counts)."""
    results = sorted(results, key=lambda r: r.case.gpus)
    reference, source = _reference(results)
    return ScalingLine(_config_label(results[0].case), tuple(_point(r, reference) for r in results),
                       reference, source, _baseline_points(results, reference, source))


def _group(results: Iterable[CaseResult], key: Callable[[CaseResult], Any]) -> dict[Any, list[CaseResult]]:
    """Cases by ``key(case)``, in the order the keys first appear."""
    groups: dict[Any, list[CaseResult]] = {}
    for result in results:
        groups.setdefault(key(result), []).append(result)
    return groups


def scaling_plots(results: Sequence[CaseResult]) -> tuple[list[ScalingPlot], list[str]]:
    """The throughput-vs-GPUs plots of a session's cases, and notes on what has none.

    A configuration measured on one GPU only is left out: one point shows no scaling (the
    measured-vs-baseline plot has it). A model x precision with no other configuration
    gets no plot.
    """
    plots: list[ScalingPlot] = []
    left_out: list[str] = []
    no_plot: list[str] = []
    by_model = _group(plotted(results), lambda r: (r.case.model, r.case.precision))
    for (model, precision), cases in by_model.items():
        configs = _group(cases, lambda r: r.case.with_gpus(1))
        lines, single = [], []
        for config, same in configs.items():
            if any(r.case.gpus > 1 for r in same):
                lines.append(scaling_line(same))
            else:
                single.append(_config_label(config))
        if lines:
            plots.append(ScalingPlot(model, precision, cases[0].unit or "throughput", tuple(lines)))
            left_out.extend(f"{model} {precision} {label}" for label in single)
        else:
            no_plot.append(f"{model} {precision}")
    notes = []
    if left_out:
        notes.append(f"throughput vs GPUs: 1-GPU cases only, left out: {', '.join(left_out)}")
    if no_plot:
        notes.append(f"throughput vs GPUs: 1-GPU cases only, no plot: {', '.join(no_plot)}")
    return plots, notes


# --------------------------------------------------------------------------- measured vs baseline


@dataclasses.dataclass(frozen=True)
class Bar:
    """One case of a measured-vs-baseline plot."""

    case_id: str
    measured: float
    low: float | None
    high: float | None
    baseline: float | None
    tolerance: float | None
    difference: float | None  # measured / baseline - 1
    verdict: Status  # the case's verdict: pass, improved, no-baseline or fail
    failed_by: str | None = None  # what failed a case whose throughput was within its tolerance

    @property
    def band(self) -> tuple[float, float] | None:
        """The tolerance band around the baseline, (low, high); None without a baseline."""
        if self.baseline is None or self.tolerance is None:
            return None
        return self.baseline * (1 - self.tolerance), self.baseline * (1 + self.tolerance)

    @property
    def text(self) -> str:
        """The label beside the bar: the figure and the difference, or why it failed."""
        figure = fmt_figure(self.measured)
        if self.baseline is None:
            return f"{figure}, no baseline" + (" (FAIL)" if self.verdict == Status.FAIL else "")
        text = f"{figure} ({100 * self.difference:+.1f}%)"
        if self.verdict == Status.FAIL:
            text += f" FAIL: {self.failed_by}" if self.failed_by else " FAIL"
        return text


@dataclasses.dataclass(frozen=True)
class ComparisonPlot:
    """The measured-vs-baseline plot of one unit."""

    unit: str
    bars: tuple[Bar, ...]

    @property
    def filename(self) -> str:
        return f"measured-vs-baseline-{slug(self.unit)}.png"

    @property
    def title(self) -> str:
        if all(b.baseline is None for b in self.bars):
            return f"Measured throughput ({self.unit}); no case has a baseline"
        return f"Measured vs baseline throughput ({self.unit})"


def _failed_by(result: CaseResult) -> str | None:
    """What failed a case other than its throughput: the scaling or the GPU utilization gate."""
    if result.verdict is not Status.FAIL or result.throughput_verdict in (None, Status.FAIL):
        return None
    if result.scaling_failed:
        return "scaling efficiency"
    if result.gpu_utilization_gate is not None and result.gpu_utilization_gate.failed:
        return "GPU utilization"
    return None


def bar(result: CaseResult) -> Bar:
    """A measured case as a bar."""
    base = result.baseline
    difference = result.difference
    if difference is None and base is not None:
        difference = result.throughput / base.throughput - 1
    return Bar(result.id, result.throughput, *_spread(result), None if base is None else base.throughput,
               None if base is None else base.tolerance, difference, result.verdict, _failed_by(result))


def comparison_plots(results: Sequence[CaseResult]) -> list[ComparisonPlot]:
    """One measured-vs-baseline plot per unit, cases in the order they ran."""
    by_unit = _group(plotted(results), lambda r: r.unit or "throughput")
    return [ComparisonPlot(unit, tuple(bar(r) for r in cases)) for unit, cases in by_unit.items()]


def fmt_figure(value: float) -> str:
    """A throughput as the plots print it: ``6,000``; ``42.5`` below 100."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
