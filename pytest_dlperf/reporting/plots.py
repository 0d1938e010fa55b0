"""PNG plots of a session's results document (``--dlperf-plot DIR``).

Two kinds, both drawn from the ``dlperf-results`` document alone, so that a results file
written earlier can be plotted again:

- throughput vs GPUs, one PNG per model x precision: the measured medians with the spread
  of the windows (min to max) as error bars, the ideal linear scaling from the 1-GPU
  figure, the baseline's figures and the scaling efficiency at each GPU count; one line
  per batch size and settings. A configuration measured on one GPU only has no scaling to
  show: it is left out, with a note.
- measured vs baseline, one PNG per unit (img/s, seq/s and tokens/s do not share an
  axis): a horizontal bar per case, colored by its verdict, with the baseline, its
  tolerance band and the difference in percent. Cases without a baseline are shown
  measured only; error, skipped and remote cases are left out, with a note.

The data of each plot is prepared by pure functions (:func:`scaling_plots`,
:func:`comparison_plots`); matplotlib is needed only to draw, it is the optional ``plot``
extra and is imported lazily. Figures are made with :class:`matplotlib.figure.Figure`
and rendered by Agg, without pyplot, so the user's backend and pyplot state are left alone.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..cases import Case
from ..verdict import FAIL, IMPROVED, NO_BASELINE, PASS

INSTALL_HINT = "pip install 'pytest-dlperf[plot]'"
NOT_PLOTTED = ("error", "skipped", "remote")
VERDICT_COLORS = {PASS: "#4C72B0", IMPROVED: "#55A868", FAIL: "#C44E52", NO_BASELINE: "#9A9A9A"}
VERDICT_LABELS = {PASS: "pass", IMPROVED: "improved", FAIL: "fail", NO_BASELINE: "no baseline"}
DPI = 100
LOG_RANGE = 20  # measured-vs-baseline: a log axis when the largest figure is this many times the smallest


def missing_matplotlib(what: str = "--dlperf-plot") -> str | None:
    """Why ``what`` cannot draw plots here (matplotlib missing), or None when it can."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        return f"{what} needs matplotlib ({exc}); install it with: {INSTALL_HINT}"
    return None


def slug(text: str) -> str:
    """A safe, stable file-name part: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.") or "x"


def _plotted(record: Mapping[str, Any]) -> bool:
    """Whether a case has a measured throughput: not an error, a skipped case or another node's ranks."""
    return record.get("verdict") not in NOT_PLOTTED and record.get("throughput") is not None


def plotted_records(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The cases the plots show, in the order they ran."""
    return [r for r in results.get("cases", []) if _plotted(r)]


def left_out_note(results: Mapping[str, Any]) -> str | None:
    """One line naming the cases no plot shows (error, skipped, remote), or None."""
    left = [r for r in results.get("cases", []) if not _plotted(r)]
    if not left:
        return None
    return "left out of the plots (no throughput): " + ", ".join(
        f"{r['id']} ({r.get('verdict') or 'unfinished'})" for r in left)


def _spread(record: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The (min, max) of the record's windows, or (None, None) without statistics."""
    stats = record.get("stats") or {}
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


def _reference(records: Sequence[Mapping[str, Any]]) -> tuple[float | None, str | None]:
    """A configuration's 1-GPU figure: its 1-rank case of this session, else a recorded scaling reference."""
    for rec in records:
        if rec["case"]["gpus"] == 1:
            return rec["throughput"], "this session"
    for rec in records:
        if rec.get("scaling"):
            return rec["scaling"]["reference"], rec["scaling"]["reference_source"]
    return None, None


def _point(record: Mapping[str, Any], reference: float | None) -> Point:
    """A measured case as a point, with its efficiency as recorded (else from the reference)."""
    gpus, value = record["case"]["gpus"], record["throughput"]
    efficiency = None
    if record.get("scaling"):
        efficiency = record["scaling"]["efficiency"]
    elif gpus > 1 and reference:
        efficiency = value / (reference * gpus)
    return Point(gpus, value, *_spread(record), efficiency=efficiency)


def _baseline_points(records: Sequence[Mapping[str, Any]], reference: float | None,
                     source: str | None) -> tuple[tuple[int, float], ...]:
    """(gpus, baseline throughput) of the records that have one, and the baseline's 1-GPU reference."""
    points = {r["case"]["gpus"]: r["baseline"]["throughput"] for r in records if r.get("baseline")}
    if source == "baseline" and reference is not None:
        points.setdefault(1, reference)
    return tuple(sorted(points.items()))


def scaling_line(records: Sequence[Mapping[str, Any]]) -> ScalingLine:
    """The line of one configuration from its measured records (any GPU counts)."""
    records = sorted(records, key=lambda r: r["case"]["gpus"])
    reference, source = _reference(records)
    return ScalingLine(_config_label(Case.from_dict(records[0]["case"])),
                       tuple(_point(r, reference) for r in records), reference, source,
                       _baseline_points(records, reference, source))


def _group(records: Iterable[Mapping[str, Any]], key) -> dict[Any, list[Mapping[str, Any]]]:
    """Records by ``key(record)``, in the order the keys first appear."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for rec in records:
        groups.setdefault(key(rec), []).append(rec)
    return groups


def scaling_plots(results: Mapping[str, Any]) -> tuple[list[ScalingPlot], list[str]]:
    """The throughput-vs-GPUs plots of a results document, and notes on what has none.

    A configuration measured on one GPU only is left out: one point shows no scaling (the
    measured-vs-baseline plot has it). A model x precision with no other configuration
    gets no plot.
    """
    plots: list[ScalingPlot] = []
    left_out: list[str] = []
    no_plot: list[str] = []
    by_model = _group(plotted_records(results), lambda r: (r["case"]["model"], r["case"]["precision"]))
    for (model, precision), records in by_model.items():
        configs = _group(records, lambda r: Case.from_dict(r["case"]).with_gpus(1))
        lines, single = [], []
        for config, recs in configs.items():
            if any(r["case"]["gpus"] > 1 for r in recs):
                lines.append(scaling_line(recs))
            else:
                single.append(_config_label(config))
        if lines:
            plots.append(ScalingPlot(model, precision, records[0].get("unit") or "throughput", tuple(lines)))
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
    verdict: str  # the case's verdict: pass, improved, no-baseline or fail
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
        figure = _fmt(self.measured)
        if self.baseline is None:
            return f"{figure}, no baseline" + (" (FAIL)" if self.verdict == FAIL else "")
        text = f"{figure} ({100 * self.difference:+.1f}%)"
        if self.verdict == FAIL:
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


def _failed_by(record: Mapping[str, Any]) -> str | None:
    """What failed a case other than its throughput: the scaling or the GPU utilization gate."""
    if record.get("verdict") != FAIL or record.get("throughput_verdict", FAIL) == FAIL:
        return None
    scale = record.get("scaling")
    if scale and scale.get("minimum") is not None and scale["efficiency"] < scale["minimum"]:
        return "scaling efficiency"
    if (record.get("gpu_utilization_gate") or {}).get("status") == "fail":
        return "GPU utilization"
    return None


def bar(record: Mapping[str, Any]) -> Bar:
    """A measured record as a bar."""
    base = record.get("baseline") or {}
    difference = record.get("difference")
    if difference is None and base:
        difference = record["throughput"] / base["throughput"] - 1
    return Bar(record["id"], record["throughput"], *_spread(record), base.get("throughput"),
               base.get("tolerance"), difference, record["verdict"], _failed_by(record))


def comparison_plots(results: Mapping[str, Any]) -> list[ComparisonPlot]:
    """One measured-vs-baseline plot per unit, cases in the order they ran."""
    by_unit = _group(plotted_records(results), lambda r: r.get("unit") or "throughput")
    return [ComparisonPlot(unit, tuple(bar(r) for r in records)) for unit, records in by_unit.items()]


# --------------------------------------------------------------------------- drawing


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _figure(width: float, height: float):
    """A figure outside pyplot (no global state), laid out to fit its labels."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _throughput_axis(axis) -> None:
    """Plain numbers with thousands separators on a throughput axis, also on a log scale."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: _fmt(v)))


def _draw_line(ax, line: ScalingLine, counts: Sequence[int], color: str, prefix: str, stagger: int = 0) -> list:
    """One configuration: measured points with window spread, baseline points, ideal line, efficiencies.

    ``stagger`` moves the efficiency labels up or down a few points, so that the labels of
    configurations with close figures do not sit on each other. Returns the legend handles
    in the order drawn.
    """
    xs = [p.gpus for p in line.points]
    ys = [p.throughput for p in line.points]
    err = [[p.throughput - (p.low if p.low is not None else p.throughput) for p in line.points],
           [(p.high if p.high is not None else p.throughput) - p.throughput for p in line.points]]
    handles = [ax.errorbar(xs, ys, yerr=err, fmt="o-", color=color, capsize=4, linewidth=2, markersize=7,
                           zorder=3, label=f"{prefix}measured")]
    if line.baseline:
        handles += ax.plot(*zip(*line.baseline), linestyle="none", marker="D", markersize=9, markerfacecolor="none",
                           markeredgecolor=color, markeredgewidth=1.5, zorder=4, label=f"{prefix}baseline")
    ideal = line.ideal(counts)
    if ideal:
        handles += ax.plot(*zip(*ideal), linestyle="--", color=color, alpha=0.55, zorder=2,
                           label=f"{prefix}{'ideal' if prefix else 'ideal linear scaling'} "
                                 f"(1 GPU: {line.reference_source})")
    for p in line.points:
        if p.efficiency is not None:
            ax.annotate(f"{100 * p.efficiency:.0f}%", (p.gpus, p.throughput), textcoords="offset points",
                        xytext=(9, stagger), ha="left", va="center", fontsize=9, color=color, fontweight="bold")
    return handles


def scaling_figure(plot: ScalingPlot):
    """The figure of a throughput-vs-GPUs plot: log2 GPU axis, ticks at the GPU counts."""
    fig = _figure(8, 5.5)
    ax = fig.add_subplot()
    counts = plot.gpu_counts
    handles = []
    for index, line in enumerate(plot.lines):
        prefix = f"{line.label}: " if len(plot.lines) > 1 else ""
        stagger = (index + 1) // 2 * 11 * (1 if index % 2 else -1)  # 0, 11, -11, 22, -22...
        handles += _draw_line(ax, line, counts, f"C{index % 10}", prefix, stagger)
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, labels=[str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlim(counts[0] / 1.4, counts[-1] * 1.4)
    ax.set_ylim(bottom=0)
    _throughput_axis(ax.yaxis)
    ax.set_xlabel("GPUs (ranks), log2 scale")
    ax.set_ylabel(f"throughput ({plot.unit})")
    fig.suptitle(plot.title, fontsize=12)
    ax.set_title("measured: median, bars from the slowest to the fastest window; "
                 "percent: scaling efficiency = speedup / GPUs", fontsize=8.5, color="#444444")
    ax.grid(True, alpha=0.3)
    # Below the axes, where it hides no point: one row, or a column per configuration (filled column first).
    columns = len(plot.lines) if len(plot.lines) > 1 else len(handles)
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=min(3, columns), frameon=False)
    return fig


def _bar_scale(bars: Sequence[Bar]) -> bool:
    """Whether the figures span so much that a log axis reads better (True) than a linear one."""
    values = [v for b in bars for v in (b.measured, b.baseline) if v]
    return max(values) / min(values) > LOG_RANGE


def _draw_bar(ax, y: int, item: Bar) -> float:
    """One case's row: tolerance band, measured bar with window spread, baseline tick; returns its right end."""
    if item.band:
        ax.barh(y, item.band[1] - item.band[0], left=item.band[0], height=0.8, color="#E3E3E3", zorder=0)
    spread = None
    if item.low is not None and item.high is not None:
        spread = [[item.measured - item.low], [item.high - item.measured]]
    ax.barh(y, item.measured, height=0.5, color=VERDICT_COLORS.get(item.verdict, "#9A9A9A"), xerr=spread,
            capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333333"}, zorder=2)
    if item.baseline is not None:
        ax.vlines(item.baseline, y - 0.4, y + 0.4, color="black", linewidth=2.5, zorder=3)
    right = max(v for v in (item.measured, item.high, item.baseline, item.band and item.band[1]) if v)
    ax.annotate(item.text, (right, y), textcoords="offset points", xytext=(6, 0), va="center", fontsize=9,
                color="#C44E52" if item.verdict == FAIL else "black")
    return right


def _comparison_legend(ax, bars: Sequence[Bar]) -> None:
    """Legend: the verdict colors present, the baseline tick and the tolerance band."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    verdicts = [v for v in VERDICT_COLORS if any(b.verdict == v for b in bars)]
    handles = [Patch(color=VERDICT_COLORS[v], label=f"measured: {VERDICT_LABELS[v]}") for v in verdicts]
    if any(b.baseline is not None for b in bars):
        handles += [Line2D([], [], color="black", linewidth=2.5, label="baseline"),
                    Patch(color="#E3E3E3", label="baseline tolerance band")]
    ax.figure.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=len(handles), frameon=False)


def comparison_figure(plot: ComparisonPlot):
    """The figure of a measured-vs-baseline plot: one row per case, the first case on top."""
    bars = plot.bars
    fig = _figure(10, 1.8 + 0.55 * len(bars))
    ax = fig.add_subplot()
    log = _bar_scale(bars)
    if log:
        ax.set_xscale("log")
    right = max(_draw_bar(ax, y, item) for y, item in enumerate(bars))
    ax.set_yticks(range(len(bars)), labels=[b.case_id for b in bars])
    ax.set_ylim(len(bars) - 0.5, -0.5)
    if log:
        # Room on the right for the labels: a share of the decades shown.
        low = min(v for b in bars for v in (b.low, b.measured, b.band and b.band[0]) if v) / 2
        ax.set_xlim(low, right * (right / low) ** 0.4)
    else:
        ax.set_xlim(0, right * 1.5)
    _throughput_axis(ax.xaxis)
    ax.set_xlabel(f"throughput ({plot.unit}){', log scale' if log else ''}; error bars: slowest to fastest window")
    ax.set_title(plot.title, fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    _comparison_legend(ax, bars)
    return fig


# --------------------------------------------------------------------------- writing


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with ``-2``, ``-3``... when another plot already took it."""
    stem, suffix = name.rsplit(".", 1)
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}.{suffix}"
    taken.add(candidate)
    return candidate


def write_plots(results: Mapping[str, Any], outdir: Path, notes: list[str] | None = None) -> list[Path]:
    """Write the PNGs of a ``dlperf-results`` document to ``outdir``; return their paths.

    Throughput-vs-GPUs plots first, then measured-vs-baseline ones. ``notes``, when given,
    receives one line per thing left out and why. Needs matplotlib (the ``plot`` extra).
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    scaling, scaling_notes = scaling_plots(results)
    figures = [(p.filename, scaling_figure, p) for p in scaling]
    figures += [(p.filename, comparison_figure, p) for p in comparison_plots(results)]
    written, taken = [], set()
    for filename, draw, plot in figures:
        path = outdir / _unique(filename, taken)
        draw(plot).savefig(path, dpi=DPI)
        written.append(path)
    if notes is not None:
        notes.extend(scaling_notes)
        left = left_out_note(results)
        if left:
            notes.append(left)
    return written
