"""``dlperf history --plot DIR``: each case's figures over its sessions, change points marked (matplotlib)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path

from .analysis import CaseHistory

#: How to install what the plots need.
INSTALL_HINT = "pip install 'pytest-dlperf[plot]'"


def missing_matplotlib(what: str = "--dlperf-plot") -> str | None:
    """Why ``what`` cannot draw plots here (matplotlib missing), or None when it can (the report's plots, the
    history's and ``dlperf plot`` all ask)."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        return f"{what} needs matplotlib ({exc}); install it with: {INSTALL_HINT}"
    return None


def file_name(history: CaseHistory) -> str:
    text = re.sub(r"[^A-Za-z0-9_.+=-]+", "-", f"{history.case_id}--{history.machine}").strip("-.")
    return f"history-{text}.png"


def write_plots(histories: Sequence[CaseHistory], folder: Path) -> list[Path]:
    """One PNG per case and machine class: figures (with each session's runs), segment levels, change points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for history in histories:
        fig, ax = plt.subplots(figsize=(9, 4.2))
        xs = list(range(1, len(history.points) + 1))
        labelled = False
        for x, point in zip(xs, history.points):
            if len(point.case.runs) > 1:
                ax.scatter([x] * len(point.case.runs), point.case.runs, s=6, color="0.7", zorder=1,
                           label=None if labelled else "a run of a session that took several")
                labelled = True
        ax.plot(xs, history.figures, marker="o", markersize=3.5, linewidth=1, color="tab:blue", zorder=2,
                label="median of the session")
        bounds = [0] + [p.step.index for p in history.change_points] + [len(xs)]
        levels = [p.step.before for p in history.change_points]
        levels += [history.change_points[-1].step.after] if history.change_points else []
        for n, level in enumerate(levels):
            ax.hlines(level, bounds[n] + 0.5, bounds[n + 1] + 0.5, colors="tab:green", linestyles="--",
                      label="level between change points" if n == 0 else None)
        for point in history.change_points:
            step = point.step
            color = "tab:red" if step.down else "tab:green"
            ax.axvline(step.index + 0.5, color=color, linewidth=1.2)
            note = f"{100 * step.change:+.1f}%"
            if point.changes:
                note += "\n" + "\n".join(point.changes[:2])
            ax.annotate(note, (step.index + 0.6, ax.get_ylim()[1]), va="top", fontsize=7, color=color)
        if history.newest_step is not None:
            ax.scatter([xs[-1]], [history.figures[-1]], s=60, facecolors="none", edgecolors="tab:red", zorder=3,
                       label="newest figures start a downward step")
        first, last = history.points[0].session.date[:10], history.points[-1].session.date[:10]
        ax.set_xlabel(f"session ({first} .. {last})")
        ax.set_ylabel(history.unit or "throughput")
        ax.set_title(f"{history.case_id} on {history.machine}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
        fig.tight_layout()
        path = folder / file_name(history)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
