"""Learning curves and the time-to-accuracy table of convergence cases (:mod:`pytest_dlperf.convergence`).

* :func:`curve_sets`: the curves of each model's configurations (pure, no matplotlib);
* :func:`write_curves`: one PNG per model, ``convergence-<model>.png``: the target metric
  against the seconds of training (left) and against the samples seen (right), one colour
  per configuration (precision, batch, GPU count, recipe), one line per run (seed), the
  target as a dashed line, as seed 003 shows its learning curves for 2 to 64 GPUs;
  ``--dlperf-plot`` and ``dlperf plot`` write them with the other plots, the Markdown
  report next to itself;
* :func:`markdown_section`: the report's "Time to accuracy" section: a row per case and
  each model's chart (or, without one, the evaluations of each configuration's first run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.case import CaseResult
from .plot_data import slug

DPI = 100


@dataclasses.dataclass(frozen=True)
class Curve:
    """One run's evaluations: (seconds, samples, metric) points."""

    label: str  # the configuration: the case id without the model
    seed: int
    points: tuple[tuple[float, int, float], ...]


@dataclasses.dataclass(frozen=True)
class CurveSet:
    """Every convergence curve of one model, with the target (of the first case: they should agree)."""

    model: str
    metric: str
    target: float | None  # None: the script's own (a time-to-train command case)
    curves: tuple[Curve, ...]

    @property
    def filename(self) -> str:
        return f"convergence-{slug(self.model)}.png"  # a model's name may hold "/" or spaces


def _label(result: CaseResult) -> str:
    return result.id[len(result.case.model) + 1:] if result.id.startswith(result.case.model + "-") else result.id


def curve_sets(results: Sequence[CaseResult]) -> list[CurveSet]:
    """The curves of the convergence cases that ran, one set per model, in the order the cases came."""
    by_model: dict[str, list[tuple[CaseResult, Mapping[str, Any]]]] = {}
    for result in results:
        if result.convergence:
            by_model.setdefault(result.case.model, []).append((result, result.convergence))
    sets = []
    for model, cases in by_model.items():
        metric, target = cases[0][1]["metric"], cases[0][1]["target"]
        curves = []
        for result, figures in cases:
            for run in figures.get("per_run") or []:
                points = tuple((p["seconds"], p["samples"], p[metric]) for p in run.get("curve") or ()
                               if p.get(metric) is not None)
                if points:
                    curves.append(Curve(_label(result), run.get("seed", 0), points))
        if curves:
            sets.append(CurveSet(model, metric, target, tuple(curves)))
    return sets


def figure(curve_set: CurveSet):
    """The chart of one model: metric vs seconds and vs samples, a colour per configuration."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=DPI, layout="constrained")
    by_time, by_samples = fig.subplots(1, 2, sharey=True)
    labels = list(dict.fromkeys(c.label for c in curve_set.curves))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    shown: set[str] = set()
    for curve in curve_set.curves:
        seconds, samples, values = zip(*curve.points)
        name = curve.label if curve.label not in shown else None
        shown.add(curve.label)
        by_time.plot(seconds, values, marker="o", markersize=3, color=colours[curve.label], label=name, alpha=0.85)
        by_samples.plot(samples, values, marker="o", markersize=3, color=colours[curve.label], alpha=0.85)
    for axis, xlabel in ((by_time, "seconds of training (evaluations included)"), (by_samples, "samples seen")):
        if curve_set.target is not None:
            axis.axhline(curve_set.target, color="0.3", linestyle="--", linewidth=1)
        axis.set_xlabel(xlabel)
        axis.grid(True, alpha=0.3)
    by_time.set_ylabel(f"validation {curve_set.metric}")
    by_time.legend(fontsize="small", loc="best")
    goal = f"to {curve_set.target:g} (dashed)" if curve_set.target is not None else "to the script's own target"
    fig.suptitle(f"{curve_set.model}: {curve_set.metric} {goal}, one line per run")
    return fig


def write_curves(results: Sequence[CaseResult], outdir: Path) -> list[Path]:
    """Write one PNG per model with convergence curves into ``outdir``; return their paths (needs matplotlib)."""
    written = []
    for curve_set in curve_sets(results):
        Path(outdir).mkdir(parents=True, exist_ok=True)
        path = Path(outdir) / curve_set.filename
        figure(curve_set).savefig(path, dpi=DPI)
        written.append(path)
    return written


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _goal(goal: Mapping[str, Any]) -> str:
    """``top1 0.9``, or a command's own goal as it reads (``run_stop status success``)."""
    if not goal:
        return "-"
    if goal.get("target") is None:
        return str(goal.get("reads") or goal.get("metric", "?"))
    return f"{goal.get('metric', '?')} {goal['target']:g}"


def markdown_section(results: Sequence[CaseResult], images: Mapping[str, str] | None = None) -> list[str]:
    """The "Time to accuracy" section; ``images``: each model's chart, relative to the report (if written)."""
    cases = [r for r in results if r.case.converges or r.convergence]
    if not cases:
        return []
    lines = ["## Time to accuracy", "",
             ("Convergence cases train to a target on the validation split; the time to target is the median over "
              "the runs (one seed each), clock from the first training step, evaluations included."), "",
             ("| case | verdict | target | reached | time to target | epochs | samples | final | img/s (whole run) "
              "| baseline |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for result in cases:
        figures = result.convergence or {}
        goal = figures.get("goal") or {}
        base = figures.get("baseline") or {}
        target = _goal(goal)
        reached = f"{figures.get('reached', 0)}/{figures.get('runs', 0)}" if figures else "-"
        lines.append(f"| {result.id} | {result.verdict} | {target} | {reached} | "
                     f"{_num(figures.get('seconds_to_target'), '.1f')} s | {_num(figures.get('epochs_to_target'), '.2f')}"
                     f" | {_num(figures.get('samples_to_target'), '.0f')} | {_num(figures.get('final'), '.3f')} | "
                     f"{_num(figures.get('throughput'), '.1f')} | "
                     f"{_num(base.get('seconds'), '.1f') + ' s' if base else '-'} |")
    lines.append("")
    for curve_set in curve_sets(cases):
        image = (images or {}).get(curve_set.model)
        if image:
            lines += [f"![{curve_set.model}: learning curves]({image})", ""]
            continue
        lines += [(f"{curve_set.model}: validation {curve_set.metric} at each evaluation (first run of each "
                   "configuration):"), "", "| configuration | seconds | samples | " + curve_set.metric + " |",
                  "|---|---|---|---|"]
        seen: set[str] = set()
        for curve in curve_set.curves:
            if curve.label in seen:
                continue
            seen.add(curve.label)
            lines += [f"| {curve.label} | {s:.1f} | {n} | {v:.3f} |" for s, n, v in curve.points]
        lines.append("")
    return lines


def write_report_curves(results: Sequence[CaseResult], report: Path) -> dict[str, str]:
    """The charts of a Markdown report, in ``<report stem>-curves/`` beside it: {model: relative path}.

    None are written (the report then shows the curves as tables) without matplotlib, or
    where the folder cannot be written.
    """
    sets = curve_sets(results)
    if not sets:
        return {}
    try:
        import matplotlib  # noqa: F401 - the plot extra
    except ImportError:
        return {}
    folder = Path(report).with_name(f"{Path(report).stem}-curves")
    try:
        write_curves(results, folder)
    except OSError:
        return {}
    return {curve_set.model: f"{folder.name}/{curve_set.filename}" for curve_set in sets}


def summary_cell(result: CaseResult) -> str:
    """The terminal summary's cell of a convergence case: ``8.8 s to top1 0.9 / 8.0 s (+10.1%)``, or how far it got."""
    figures = result.convergence or {}
    seconds, base = figures.get("seconds_to_target"), (figures.get("baseline") or {}).get("seconds")
    if seconds is None:
        return f"target not reached ({figures.get('metric')} {_num(figures.get('final'), '.3g')})"
    target = figures.get("target")
    text = f"{seconds:.1f} s to " + (f"{figures.get('metric')} {target:g}" if target is not None
                                     else _goal(figures.get("goal") or {}))
    if base:
        text += f" / {base:.1f} s ({100 * (seconds / base - 1):+.1f}%)"
    return text
