"""The terminal summary: one table per model, as the seed reports lay them out.

Rows are GPU counts, columns precision x batch size (and settings); each cell holds the
measured median, the baseline and the difference in percent, with FAIL / ERROR / +
(improved) marks.  Below the tables: FLOPs and utilization per case (TFLOP/s, MFU, GPU
and CPU utilization, peak RSS, from the workers' telemetry), then regressions,
improvements, cases without a baseline and skipped cases, each with its one-line reason.

Every function here reads typed records (:class:`~pytest_dlperf.results.case.CaseResult`).  The
layout (:func:`model_grids`), the cells and the utilization rows are shared with the
Markdown report (:mod:`pytest_dlperf.reporting.markdown_tables`), which renders the same figures.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ..cases import Case
from ..gate.format import fmt_value
from ..results.case import CaseResult, Scaling, Status
from ..results.telemetry import gpu_unavailable_reason, gpu_utilizations, host_metric, telemetry_summaries
from ..results.judgement import Judgement
from . import convergence
from .verdicts import summary_lines as verdict_lines

MARKS = {Status.FAIL: " FAIL", Status.ERROR: " ERROR", Status.IMPROVED: " +", Status.INCONCLUSIVE: " ~"}


def render_table(header: Sequence[str], rows: Iterable[Sequence[str]], align_right=(0,)) -> list[str]:
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
              for i in range(len(header))]

    def fmt(cells):
        return " | ".join(c.rjust(w) if i in align_right else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [fmt(header), "-+-".join("-" * w for w in widths), *(fmt(r) for r in rows)]


CELLS = {Status.SKIPPED: "skipped", Status.REMOTE: "rank 0 elsewhere"}


def cell(result: CaseResult) -> str:
    """``measured / baseline (difference)`` with its mark; or what became of a case not measured."""
    verdict = result.verdict
    if verdict in CELLS:
        return CELLS[verdict]
    if verdict is Status.DATA_ONLY and result.data:
        loader = result.data
        return f"{fmt_value(loader['samples_per_second'])} data-only ({loader['megabytes_per_second']:.1f} MB/s)"
    if result.convergence:  # a convergence case: its time to target (reporting/convergence.py)
        return convergence.summary_cell(result)
    if not result.measured:
        return "ERROR" if verdict is Status.ERROR else "-"
    text = fmt_value(result.throughput)
    if result.baseline is not None:
        text += f" / {fmt_value(result.baseline.throughput)} ({100 * result.difference:+.1f}%)"
    else:
        text += " / -"
    # The throughput's own verdict: a case that failed only its scaling gate is marked there.
    return text + MARKS.get(result.throughput_verdict or verdict, "")


def scaling_cell(scaling: Scaling) -> str:
    """``6.77x (85%)``, with `` FAIL`` when the efficiency is below the gate's minimum, `` shared GPU`` when the
    ranks shared GPUs (--dlperf-share-gpus: no scaling measured)."""
    shared = " shared GPU" if scaling.shared_gpus is not None else ""
    return f"{scaling.speedup:.2f}x ({100 * scaling.efficiency:.0f}%){' FAIL' if scaling.failed else ''}{shared}"


def _column(case: Case, chosen_batch: int | None = None) -> str:
    """``amp bs256 img160``; a ``"max"`` batch with the one its search chose, ``amp bs=max_144``."""
    batch = f"bs=max_{chosen_batch}" if chosen_batch else f"bs{case.batch_size}"
    return " ".join([case.precision, batch, *case.settings_parts, *case.target_parts])


# -- telemetry and FLOPs of a case record

def _fmt_tflops(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


UTILIZATION_TITLE = "FLOPs and utilization (over the measured windows; CPU: whole host, RSS: per worker process)"
#: The mark of a GPU case whose GPUs the host kept waiting (:mod:`pytest_dlperf.results.host_bound`).
HOST_BOUND = "host-bound"
UTILIZATION_HEADER = ("case", "TFLOP/s", "MFU", "GPU util mean / max", "CPU util mean", "RSS max")


def utilization_rows(results: Sequence[CaseResult]) -> tuple[list[list[str]], list[str]]:
    """Rows of the "FLOPs and utilization" table (:data:`UTILIZATION_HEADER`) for the measured
    cases that have FLOPs or telemetry, and the distinct reasons GPU telemetry was unavailable."""
    rows: list[list[str]] = []
    reasons: list[str] = []
    for result in results:
        if not result.measured or not (result.flops or result.telemetry):
            continue
        flops = result.flops or {}
        summaries = telemetry_summaries(result)
        gpus = gpu_utilizations(summaries)
        cpu = host_metric(summaries, "cpu_percent", "mean")
        rss = host_metric(summaries, "rss_bytes", "max")
        rows.append([
            result.id,
            _fmt_tflops(flops["tflops"]) if flops.get("tflops") is not None else "-",
            f"{100 * flops['mfu']:.1f}%" if flops.get("mfu") is not None else "-",
            (f"{sum(g[1] for g in gpus) / len(gpus):.0f}% / {max(g[2] for g in gpus):.0f}%" if gpus else "-")
            + (f" {HOST_BOUND}" if result.host_bound is not None and result.host_bound.bound else ""),
            f"{cpu:.0f}%" if cpu is not None else "-",
            f"{rss / 2**20:.0f} MiB" if rss is not None else "-",
        ])
        reason = gpu_unavailable_reason(summaries)
        if reason and reason not in reasons:
            reasons.append(reason)
    return rows, reasons


def telemetry_note(reason: str) -> str:
    """The one line that says why GPU telemetry was unavailable."""
    what = reason if reason.startswith("unavailable") else f"unavailable: {reason}"
    return f"telemetry: GPU {what} (host metrics only)"


def utilization_lines(results: Sequence[CaseResult]) -> list[str]:
    """The "FLOPs and utilization" section, and once per session why GPU telemetry was unavailable."""
    rows, reasons = utilization_rows(results)
    if not rows:
        return []
    lines = [UTILIZATION_TITLE]
    lines.extend(render_table(UTILIZATION_HEADER, rows, align_right=(1, 2, 3, 4, 5)))
    lines.extend(telemetry_note(reason) for reason in reasons)
    lines.append("")
    return lines


@dataclasses.dataclass
class ModelGrid:
    """One model's cases laid out as the seed reports do: rows are GPU counts, columns precision x batch."""

    model: str
    unit: str
    columns: list[str]
    records: dict[int, dict[str, CaseResult]]  # gpus -> column -> record

    @property
    def gpu_counts(self) -> list[int]:
        return sorted(self.records)

    @property
    def scaled_columns(self) -> set[str]:
        """Columns with a speedup figure in some row (a multi-GPU case that has one)."""
        return {col for row in self.records.values() for col, rec in row.items() if rec.scaling is not None}


def model_grids(results: Sequence[CaseResult]) -> list[ModelGrid]:
    """The records grouped per model, in the order models first appear; a later duplicate cell wins."""
    grids: dict[str, ModelGrid] = {}
    for result in results:
        case = result.case
        grid = grids.setdefault(case.model, ModelGrid(case.model, "", [], defaultdict(dict)))
        col = _column(case, result.chosen_batch)
        if col not in grid.columns:
            grid.columns.append(col)
        grid.records[case.gpus][col] = result
    for grid in grids.values():
        units = {r.unit for row in grid.records.values() for r in row.values() if r.unit}
        grid.unit = units.pop() if len(units) == 1 else "throughput"
    return list(grids.values())


#: Windows that vary more than this (CV) make a speedup built on them unreliable (marked ``~``).
NOISY_CV = 0.10
NOISY_NOTE = (f"~: the windows of the case or of its 1-GPU reference vary by more than {NOISY_CV:.0%} (CV): "
              "the speedup is not a reliable figure (measure more runs: --dlperf-runs)")


def noisy(result: CaseResult | None) -> bool:
    return result is not None and bool(result.stats) and result.stats.get("cv", 0.0) > NOISY_CV


def speedup_cell(result: CaseResult, reference: CaseResult | None = None) -> str | None:
    """Speedup (efficiency) of a multi-GPU case; ``1.00x`` for a measured 1-GPU case; else None.

    ``~`` follows a speedup whose case, or its 1-GPU ``reference`` in this session, is noisy.
    """
    if result.scaling is not None:
        mark = " ~" if noisy(result) or (result.scaling.reference_source == "this session" and noisy(reference)) \
            else ""
        return scaling_cell(result.scaling) + mark
    if result.case.gpus == 1 and result.measured:
        return "1.00x"
    return None


def fit_columns(header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None) -> list[list[int]]:
    """Groups of the data columns (1..n; column 0, the row label, goes with each) whose tables fit ``width``."""
    columns = list(range(1, len(header)))
    if not width or not columns:
        return [columns]
    cell_width = {i: max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))}
    groups: list[list[int]] = [[]]
    used = cell_width[0]
    for i in columns:
        need = 3 + cell_width[i]  # " | " and the cell
        if groups[-1] and used + need > width:
            groups.append([])
            used = cell_width[0]
        groups[-1].append(i)
        used += need
    return groups


def summary_lines(results: Sequence[CaseResult], baseline_path: str | None = None,
                  width: int | None = None) -> list[str]:
    """The ``dlperf summary`` section: a table per model, utilization, then what needs attention.

    A table wider than ``width`` (the terminal's) is split into several, each with the GPU counts.
    """
    lines: list[str] = []
    noisy_speedups = False
    for grid in model_grids(results):
        scaled = grid.scaled_columns
        header = [c for col in grid.columns for c in ([col, col + " speedup"] if col in scaled else [col])]
        rows = []
        for gpus in grid.gpu_counts:
            row = [str(gpus)]
            for col in grid.columns:
                rec = grid.records[gpus].get(col)
                row.append(cell(rec) if rec else "")
                if col in scaled:
                    speedup = (speedup_cell(rec, grid.records.get(1, {}).get(col)) or "") if rec else ""
                    noisy_speedups |= speedup.endswith(" ~")
                    row.append(speedup)
            rows.append(row)
        title = f"{grid.model} ({grid.unit}; measured / baseline (difference); speedup over 1 GPU (efficiency))"
        full = ["gpus", *header]
        for part, group in enumerate(fit_columns(full, rows, width)):
            lines.append(title if part == 0 else f"{grid.model}, continued")
            lines.extend(render_table([full[0], *(full[i] for i in group)], [[r[0], *(r[i] for i in group)]
                                                                             for r in rows]))
            lines.append("")
    if noisy_speedups:
        lines.insert(len(lines) - 1, NOISY_NOTE)
    lines.extend(utilization_lines(results))

    def section(title: str, verdicts: tuple[Status, ...]) -> None:
        chosen = [r for r in results if r.verdict in verdicts]
        if chosen:
            lines.append(f"{title} ({len(chosen)}):")
            for r in chosen:
                if r.verdict is Status.SKIPPED:
                    lines.append(f"  {r.id}: {r.message}")
                else:  # the first line, then one fact each (pytest_dlperf.reporting.verdicts)
                    lines.extend(verdict_lines(r.judgement or Judgement.of(r.verdict, r.message)))

    section("regressions and errors", (Status.FAIL, Status.ERROR))
    section("inconclusive: not decided within the run budget", (Status.INCONCLUSIVE,))
    section("improved: update the baseline", (Status.IMPROVED,))
    section("no baseline" + (f" in {baseline_path}" if baseline_path else ""), (Status.NO_BASELINE,))
    section("data-only: the data loader alone, not judged", (Status.DATA_ONLY,))
    section("skipped", (Status.SKIPPED,))
    lines.append("dlperf: " + verdict_counts(results))
    return lines


def verdict_counts(results: Iterable[CaseResult]) -> str:
    """``1 fail, 3 pass, 1 skipped``: how many cases got each verdict, verdicts sorted by name."""
    counts: dict[str, int] = defaultdict(int)
    for result in results:
        counts[result.verdict.value if result.verdict is not None else "?"] += 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
