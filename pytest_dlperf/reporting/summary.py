"""The terminal summary: one table per model, as the seed reports lay them out.

Rows are GPU counts, columns precision x batch size (and settings); each cell holds the
measured median, the baseline and the difference in percent, with FAIL / ERROR / +
(improved) marks.  Below the tables: FLOPs and utilization per case (TFLOP/s, MFU, GPU
and CPU utilization, peak RSS, from the workers' telemetry), then regressions,
improvements, cases without a baseline and skipped cases, each with its one-line reason.

The layout (:func:`model_grids`), the cells and the utilization rows are shared with the
Markdown report (:mod:`pytest_dlperf.reporting.markdown`), which renders the same figures.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..cases import Case
from ..results import (gpu_unavailable_reason, gpu_utilizations, host_metric,
                       telemetry_summaries)
from ..verdict import FAIL, IMPROVED, NO_BASELINE, PASS, fmt_value

MARKS = {FAIL: " FAIL", "error": " ERROR", IMPROVED: " +"}


def render_table(header: Sequence[str], rows: Iterable[Sequence[str]], align_right=(0,)) -> list[str]:
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
              for i in range(len(header))]

    def fmt(cells):
        return " | ".join(c.rjust(w) if i in align_right else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [fmt(header), "-+-".join("-" * w for w in widths), *(fmt(r) for r in rows)]


def cell(record: Mapping[str, Any]) -> str:
    verdict = record.get("verdict")
    if verdict in ("skipped", "remote"):
        return {"skipped": "skipped", "remote": "rank 0 elsewhere"}[verdict]
    if verdict == "data-only" and record.get("data"):
        loader = record["data"]
        return f"{fmt_value(loader['samples_per_second'])} data-only ({loader['megabytes_per_second']:.1f} MB/s)"
    if record.get("throughput") is None:
        return "ERROR" if verdict == "error" else "-"
    text = fmt_value(record["throughput"])
    if record.get("baseline"):
        text += f" / {fmt_value(record['baseline']['throughput'])} ({100 * record['difference']:+.1f}%)"
    else:
        text += " / -"
    # The throughput's own verdict: a case that failed only its scaling gate is marked there.
    return text + MARKS.get(record.get("throughput_verdict", verdict), "")


def scaling_cell(scaling: Mapping[str, Any]) -> str:
    mark = " FAIL" if scaling["minimum"] is not None and scaling["efficiency"] < scaling["minimum"] else ""
    return f"{scaling['speedup']:.2f}x ({100 * scaling['efficiency']:.0f}%){mark}"


def _column(case: Case, max_batch: Mapping[str, Any] | None = None) -> str:
    """``amp bs256 img160``; a ``"max"`` batch with the one its search chose, ``amp bs=max_144``."""
    batch = f"bs{case.batch_size}"
    if max_batch and max_batch.get("chosen"):
        batch = f"bs=max_{max_batch['chosen']}"
    return " ".join([case.precision, batch, *case.settings_parts])


# -- telemetry and FLOPs of a case record

def _fmt_tflops(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


UTILIZATION_TITLE = "FLOPs and utilization (over the measured windows; CPU: whole host, RSS: per worker process)"
UTILIZATION_HEADER = ("case", "TFLOP/s", "MFU", "GPU util mean / max", "CPU util mean", "RSS max")


def utilization_rows(records: Sequence[Mapping[str, Any]]) -> tuple[list[list[str]], list[str]]:
    """Rows of the "FLOPs and utilization" table (:data:`UTILIZATION_HEADER`) for the measured
    cases that have FLOPs or telemetry, and the distinct reasons GPU telemetry was unavailable."""
    rows: list[list[str]] = []
    reasons: list[str] = []
    for rec in records:
        if rec.get("throughput") is None or not (rec.get("flops") or rec.get("telemetry")):
            continue
        flops = rec.get("flops") or {}
        summaries = telemetry_summaries(rec)
        gpus = gpu_utilizations(summaries)
        cpu = host_metric(summaries, "cpu_percent", "mean")
        rss = host_metric(summaries, "rss_bytes", "max")
        rows.append([
            rec["id"],
            _fmt_tflops(flops["tflops"]) if flops.get("tflops") is not None else "-",
            f"{100 * flops['mfu']:.1f}%" if flops.get("mfu") is not None else "-",
            (f"{sum(g[1] for g in gpus) / len(gpus):.0f}% / {max(g[2] for g in gpus):.0f}%" if gpus else "-"),
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


def utilization_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "FLOPs and utilization" section, and once per session why GPU telemetry was unavailable."""
    rows, reasons = utilization_rows(records)
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
    records: dict[int, dict[str, Mapping[str, Any]]]  # gpus -> column -> record

    @property
    def gpu_counts(self) -> list[int]:
        return sorted(self.records)

    @property
    def scaled_columns(self) -> set[str]:
        """Columns with a speedup figure in some row (a multi-GPU case that has one)."""
        return {col for row in self.records.values() for col, rec in row.items() if rec.get("scaling")}


def model_grids(records: Sequence[Mapping[str, Any]]) -> list[ModelGrid]:
    """The records grouped per model, in the order models first appear; a later duplicate cell wins."""
    grids: dict[str, ModelGrid] = {}
    for rec in records:
        case = Case.from_dict(rec["case"])
        grid = grids.setdefault(case.model, ModelGrid(case.model, "", [], defaultdict(dict)))
        col = _column(case, rec.get("max_batch"))
        if col not in grid.columns:
            grid.columns.append(col)
        grid.records[case.gpus][col] = rec
    for grid in grids.values():
        units = {r["unit"] for row in grid.records.values() for r in row.values() if r.get("unit")}
        grid.unit = units.pop() if len(units) == 1 else "throughput"
    return list(grids.values())


def speedup_cell(record: Mapping[str, Any]) -> str | None:
    """Speedup (efficiency) of a multi-GPU case; ``1.00x`` for a measured 1-GPU case; else None."""
    if record.get("scaling"):
        return scaling_cell(record["scaling"])
    if record["case"].get("gpus", 1) == 1 and record.get("throughput") is not None:
        return "1.00x"
    return None


def summary_lines(records: Sequence[Mapping[str, Any]], baseline_path: str | None = None) -> list[str]:
    lines: list[str] = []
    for grid in model_grids(records):
        scaled = grid.scaled_columns
        header = [c for col in grid.columns for c in ([col, col + " speedup"] if col in scaled else [col])]
        rows = []
        for gpus in grid.gpu_counts:
            row = [str(gpus)]
            for col in grid.columns:
                rec = grid.records[gpus].get(col)
                row.append(cell(rec) if rec else "")
                if col in scaled:
                    row.append((speedup_cell(rec) or "") if rec else "")
            rows.append(row)
        lines.append(f"{grid.model} ({grid.unit}; measured / baseline (difference); "
                     "speedup over 1 GPU (efficiency))")
        lines.extend(render_table(["gpus", *header], rows))
        lines.append("")
    lines.extend(utilization_lines(records))

    def section(title: str, verdicts: tuple[str, ...]) -> None:
        chosen = [r for r in records if r.get("verdict") in verdicts]
        if chosen:
            lines.append(f"{title} ({len(chosen)}):")
            for r in chosen:
                text = f"{r['id']}: {r['message']}" if r["verdict"] == "skipped" else r["message"].splitlines()[0]
                lines.append(f"  {text}")

    section("regressions and errors", (FAIL, "error"))
    section("improved: update the baseline", (IMPROVED,))
    section("no baseline" + (f" in {baseline_path}" if baseline_path else ""), (NO_BASELINE,))
    section("data-only: the data loader alone, not judged", ("data-only",))
    remeasured = [r for r in records if r.get("verdict") == PASS and len(r.get("attempts", [])) > 1]
    if remeasured:
        # Passed, but only on re-measurement: worth a look before it becomes a regression.
        lines.append(f"passed on re-measurement ({len(remeasured)}):")
        lines.extend(f"  {r['message'].splitlines()[0]}" for r in remeasured)
    section("skipped", ("skipped",))
    lines.append("dlperf: " + verdict_counts(records))
    return lines


def verdict_counts(records: Iterable[Mapping[str, Any]]) -> str:
    """``1 fail, 3 pass, 1 skipped``: how many cases got each verdict, verdicts sorted by name."""
    counts: dict[str, int] = defaultdict(int)
    for rec in records:
        counts[rec.get("verdict", "?")] += 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
