"""PNG plots of a session's cases (``--dlperf-plot DIR``, ``dlperf plot``): drawing and writing them.

Two kinds, both drawn from the typed cases alone (a session's, or a results file's read
back with :func:`pytest_dlperf.results.case.cases_from`), so a results file written earlier can
be plotted again:

- throughput vs GPUs, one PNG per model x precision: the measured medians with the spread
  of the windows (min to max) as error bars, the ideal linear scaling from the 1-GPU
  figure, the baseline's figures and the scaling efficiency at each GPU count; one line
  per batch size and settings. A configuration measured on one GPU only has no scaling to
  show: it is left out, with a note.
- measured vs baseline, one PNG per unit (img/s, seq/s and tokens/s do not share an
  axis): a horizontal bar per case, colored by its verdict, with the baseline, its
  tolerance band and the difference in percent. Cases without a baseline are shown
  measured only; cases not measured (error, skipped, remote, data-only) are left out, with a note.

What each plot shows is worked out by :mod:`pytest_dlperf.reporting.plot_data` (pure, no
matplotlib); this module draws it.  matplotlib is the optional ``plot`` extra and is
imported lazily. Figures are made with :class:`matplotlib.figure.Figure` and rendered by
Agg, without pyplot, so the user's backend and pyplot state are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..history.plot import missing_matplotlib  # noqa: F401  (the plot options check it here)
from ..results.case import CaseResult, Status
from . import convergence
from .plot_data import (Bar, ComparisonPlot, ScalingLine, ScalingPlot, comparison_plots, fmt_figure, left_out_note,
                        scaling_plots)

VERDICT_COLORS = {Status.PASS: "#4C72B0", Status.IMPROVED: "#55A868", Status.FAIL: "#C44E52",
                  Status.NO_BASELINE: "#9A9A9A", Status.INCONCLUSIVE: "#DD8452"}
VERDICT_LABELS = {Status.PASS: "pass", Status.IMPROVED: "improved", Status.FAIL: "fail",
                  Status.NO_BASELINE: "no baseline", Status.INCONCLUSIVE: "inconclusive"}
DPI = 100
LOG_RANGE = 20  # measured-vs-baseline: a log axis when the largest figure is this many times the smallest


# --------------------------------------------------------------------------- drawing


def _figure(width: float, height: float):
    """A figure outside pyplot (no global state), laid out to fit its labels."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _throughput_axis(axis) -> None:
    """Plain numbers with thousands separators on a throughput axis, also on a log scale."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt_figure(v)))


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
        # The figure is the runs' estimate, the spread the windows': a run set aside as busy can leave
        # the estimate outside the windows' range (matplotlib refuses a negative error).
        spread = [[max(0.0, item.measured - item.low)], [max(0.0, item.high - item.measured)]]
    ax.barh(y, item.measured, height=0.5, color=VERDICT_COLORS.get(item.verdict, "#9A9A9A"), xerr=spread,
            capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333333"}, zorder=2)
    if item.baseline is not None:
        ax.vlines(item.baseline, y - 0.4, y + 0.4, color="black", linewidth=2.5, zorder=3)
    right = max(v for v in (item.measured, item.high, item.baseline, item.band and item.band[1]) if v)
    ax.annotate(item.text, (right, y), textcoords="offset points", xytext=(6, 0), va="center", fontsize=9,
                color="#C44E52" if item.verdict == Status.FAIL else "black")
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


def ab_figure(results: Sequence[CaseResult]):
    """An A/B session's cases (``--dlperf-against``): each pair's ratio candidate / reference (a hollow dot: busy,
    not counted), the estimate with its interval, and the tolerance band around 1; the first case on top."""
    fig = _figure(10, 1.8 + 0.55 * len(results))
    ax = fig.add_subplot()
    tolerance = results[0].paired.tolerance
    ax.axvspan(1 - tolerance, 1 + tolerance, color="0.9", label=f"within the tolerance ({tolerance:.0%})")
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    for y, result in enumerate(results):
        pairs = result.paired.pairs
        ax.scatter([p.ratio for p in pairs], [y] * len(pairs), s=18, zorder=3,
                   facecolors=["none" if p.busy else "C0" for p in pairs], edgecolors="C0")
        est = result.paired.estimate
        if est is not None:
            ax.errorbar([est.value], [y - 0.25], xerr=[[est.value - est.low], [est.high - est.value]], fmt="D",
                        color="C3" if result.verdict is Status.FAIL else "C2", capsize=3)
    ax.set_yticks(range(len(results)), labels=[r.id for r in results])
    ax.set_ylim(len(results) - 0.5, -0.75)
    ax.set_xlabel("candidate / reference: each pair (dots; hollow: busy), the estimate and its 98% interval")
    ax.set_title("A/B: candidate against reference", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
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


def write_plots(results: Sequence[CaseResult], outdir: Path, notes: list[str] | None = None) -> list[Path]:
    """Write the PNGs of a session's cases to ``outdir``; return their paths.

    Throughput-vs-GPUs plots first, then measured-vs-baseline ones. ``notes``, when given,
    receives one line per thing left out and why. Needs matplotlib (the ``plot`` extra).
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    scaling, scaling_notes = scaling_plots(results)
    figures = [(p.filename, scaling_figure, p) for p in scaling]
    figures += [(p.filename, comparison_figure, p) for p in comparison_plots(results)]
    paired = [r for r in results if r.paired is not None and r.paired.pairs]
    figures += [("ab-ratios.png", ab_figure, paired)] if paired else []
    written, taken = [], set()
    for filename, draw, plot in figures:
        path = outdir / _unique(filename, taken)
        draw(plot).savefig(path, dpi=DPI)
        written.append(path)
    written += convergence.write_curves(results, outdir)  # learning curves of convergence cases, one per model
    if notes is not None:
        notes.extend(scaling_notes)
        left = left_out_note(results)
        if left:
            notes.append(left)
    return written
