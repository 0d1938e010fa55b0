"""The Markdown report's tables of the cases: Markdown primitives and every section read from typed records.

:mod:`pytest_dlperf.reporting.markdown` lays out the report (title, environment, logs) and
writes it; the sections here render what the cases measured, from
:class:`~pytest_dlperf.results.case.CaseResult` objects: the method (step counts, runs, data,
tolerance), the throughput and speedup grids per model, the comparison with the baseline,
the windows' spread, FLOPs / MFU / telemetry, and each case's verdict.

The grids, cells and utilization rows come from :mod:`pytest_dlperf.reporting.summary`,
the terminal summary, so the two never disagree.
"""

from __future__ import annotations

import html

import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..gate.evidence import CONFIDENCE
from ..gate.format import fmt_pct, fmt_value
from ..results.case import CaseResult
from ..results.telemetry import gpu_metric, host_metric, telemetry_summaries
from ..results.judgement import Judgement
from . import summary as report
from . import verdicts

# The method's parameters: (key in a case's "parameters", what it means).
METHOD_PARAMETERS = (
    ("warmup_steps", "warm-up steps per run, not timed"),
    ("steps", "steps per measured window"),
    ("repeats", "measured windows per run (repeats)"),
    ("runs", "runs per case (fresh worker processes): a run's figure is the median of its windows, the case's the geometric mean of its runs'"),
    ("device", "device"),
    ("launcher", "launcher of the ranks"),
)


# --------------------------------------------------------------------------- Markdown primitives


def escape(text: Any) -> str:
    """A table cell's text: one line, with the characters that would end the cell escaped, and HTML's (a case id or
    a baseline's source from a file is text, never markup where the report is rendered)."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    return text.replace("\\", "\\\\").replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align_right: Iterable[int] = ()) -> list[str]:
    """A GitHub-flavoured Markdown table; columns in ``align_right`` (numbers) are right-aligned."""
    right = set(align_right)
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(escape(h) for h in header) + " |", "|" + "|".join(rule) + "|"]
    lines.extend("| " + " | ".join(escape(c) for c in row) + " |" for row in rows)
    return lines


def link(text: str, target: str) -> str:
    """A Markdown link to a relative path (each part URL-quoted, so ``=`` and spaces survive)."""
    return f"[{text}]({urllib.parse.quote(target)})"


def get_path(document: Mapping[str, Any] | None, *path: str) -> Any:
    """``document[path[0]][path[1]]...``, or None where any step is missing or not a mapping."""
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def fmt_bytes(value: Any) -> str | None:
    """``30.0 GiB``, ``705 MiB``; None when ``value`` is not a number."""
    if not isinstance(value, (int, float)):
        return None
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f} MiB/s"


# --------------------------------------------------------------------------- sections


def _distinct(results: Sequence[CaseResult], value: Callable[[CaseResult], Any]) -> str:
    """One value when every case agrees, else each value with the cases that used it."""
    by_value: dict[str, list[str]] = {}
    for result in results:
        by_value.setdefault(str(value(result)), []).append(result.id)
    if len(by_value) == 1:
        return next(iter(by_value))
    return "; ".join(f"{v} ({', '.join(ids) if len(ids) <= 3 else f'{len(ids)} cases'})"
                     for v, ids in by_value.items())


def _data_backend(result: CaseResult) -> str:
    """Where a case's batches came from: its ``data`` setting, else synthetic (one batch, on the device)."""
    runs = [run for attempt in result.attempts for run in attempt.runs]
    effective = next((run.settings.get("data") for run in runs if run.settings), None)
    return result.case.settings_dict.get("data") or effective or "synthetic"


def method_section(results: Sequence[CaseResult], options: Mapping[str, Any]) -> list[str]:
    """How the figures were taken: the step counts, runs, data, device and how cases are judged."""
    measured = [r for r in results if r.parameters]
    # the interval the session's verdicts used (an older document's may differ from today's CONFIDENCE)
    confidence = next((r.evidence.estimate.confidence for r in results
                       if r.evidence is not None and r.evidence.estimate is not None), CONFIDENCE)
    lines = ["## Method", "",
             "Every step is real training (forward, loss, backward, optimizer step). Each run is a "
             "fresh process: it skips the warm-up steps, then times windows of steps between device "
             "synchronizations. A window's throughput is its samples over its seconds; a run's figure is "
             "the median of its windows, and a case's the geometric mean of its runs' figures, with a "
             f"{round(100 * confidence)}% interval; runs are added one at a time until the interval decides the verdict. Multi-GPU cases "
             "are data-parallel (DDP): the global batch over the slowest rank's time.", ""]
    if not measured:
        return lines + ["No case was measured.", ""]
    rows = [(meaning, _distinct(measured, lambda r, k=key: r.parameters.get(k, "unknown")))
            for key, meaning in METHOD_PARAMETERS]
    rows.append(("data", _distinct(measured, _data_backend)))
    if any(r.parameters.get("cpu_threads") for r in measured):  # the CPU's intra-op threads (dlperf_cpu_threads)
        rows.append(("intra-op threads per CPU rank (OMP_NUM_THREADS)",
                     _distinct(measured, lambda r: r.parameters.get("cpu_threads") or "not set (a GPU case)")))
    if "max_runs" in options:
        rows.append(("most runs of a case before it is inconclusive", options["max_runs"]))
    elif "confirm" in options:
        rows.append(("re-measurements of a case below its baseline before it fails", options["confirm"]))
    rows.append(("tolerance", _distinct(measured, lambda r: fmt_pct(r.baseline.tolerance)
                                        if r.baseline is not None else "no baseline")))
    lines.extend(table(["parameter", "value"], rows))
    return lines + [""]


def throughput_section(results: Sequence[CaseResult]) -> list[str]:
    """Per model: the throughput grid, then the speedup grid when a multi-GPU case has one."""
    lines = ["## Throughput", "",
             "Rows are GPUs (ranks), columns precision x per-GPU batch size. Cells: measured / baseline "
             "(difference); FAIL: below the baseline's tolerance, +: above it, ERROR: not measured.", ""]
    for grid in report.model_grids(results):
        rows = [[gpus] + [report.cell(grid.records[gpus][col]) if col in grid.records[gpus] else ""
                          for col in grid.columns] for gpus in grid.gpu_counts]
        lines += [f"### {grid.model} ({grid.unit})", ""]
        lines += table(["GPUs", *grid.columns], rows, align_right=range(len(grid.columns) + 1)) + [""]
        if grid.scaled_columns:
            lines += _speedup(grid)
    return lines


def _speedup(grid: report.ModelGrid) -> list[str]:
    """The speedup grid of one model, and which 1-GPU figures it divides by."""
    def cell(gpus: int, col: str) -> str:
        rec = grid.records[gpus].get(col)
        return (report.speedup_cell(rec, grid.records.get(1, {}).get(col)) or "") if rec else ""

    rows = [[gpus] + [cell(gpus, col) for col in grid.columns] for gpus in grid.gpu_counts]
    scalings = [rec.scaling for row in grid.records.values() for rec in row.values() if rec.scaling is not None]
    sources = sorted({s.reference_source + (f" ({s.reference_kind})" if s.reference_kind else "") for s in scalings})
    minima = sorted({s.minimum for s in scalings if s.minimum is not None})
    gate = f" Cases below {', '.join(fmt_pct(m) for m in minima)} efficiency are marked FAIL." if minima else ""
    lines = [f"Speedup over 1 GPU (efficiency = speedup / GPUs); the 1-GPU figure is from "
             f"{' and '.join(sources)}.{gate}", ""]
    lines += table(["GPUs", *grid.columns], rows, align_right=range(len(grid.columns) + 1))
    if any(c.endswith(" ~") for row in rows for c in row[1:]):
        lines += ["", report.NOISY_NOTE]
    return lines + [""]


def comparison_section(results: Sequence[CaseResult], baseline: Mapping[str, Any] | None) -> list[str]:
    """Each case against its baseline entry, in percent, with where the baseline figure comes from.

    ``baseline``: the results document's ``baseline`` (its path, source and hardware), if any.
    """
    lines = ["## Comparison with the baseline", ""]
    if baseline:
        hardware = "; ".join(f"{k}: {v}" for k, v in (baseline.get("hardware") or {}).items())
        lines += [f"Baseline `{baseline.get('path', '?')}`: {baseline.get('source') or 'no source given'}"
                  + (f" (hardware: {hardware})" if hardware else "") + ".", ""]
    compared = [r for r in results if r.baseline is not None]
    if not compared:
        return lines + ["No case has a baseline entry.", ""]
    rows = [(r.id, fmt_value(r.throughput) if r.measured else "-", fmt_value(r.baseline.throughput),
             f"{100 * r.difference:+.1f}%" if r.difference is not None else "-",
             f"±{fmt_pct(r.baseline.tolerance)}", r.throughput_verdict or r.verdict,
             r.baseline.source or "-") for r in compared]
    lines += table(["case", "measured", "baseline", "difference", "tolerance", "verdict", "source"], rows,
                   align_right=(1, 2, 3, 4))
    missing = [r.id for r in results if r.baseline is None and r.measured]
    if missing:
        lines += ["", f"No baseline entry: {', '.join(missing)}."]
    return lines + [""]


def windows_section(results: Sequence[CaseResult]) -> list[str]:
    """The windows' spread per measured case: how far the median can be trusted."""
    measured = [r for r in results if r.stats]
    if not measured:
        return []
    rows = [(r.id, r.stats["n"], fmt_value(r.stats["median"]), fmt_value(r.stats["min"]),
             fmt_value(r.stats["max"]), fmt_pct(r.stats["cv"]), len(r.attempts),
             f"{r.duration:.1f} s" if isinstance(r.duration, (int, float)) else "-")
            for r in measured]
    lines = ["## Windows", ""]
    lines += table(["case", "windows", "median", "min", "max", "CV", "attempts", "duration"], rows,
                   align_right=range(1, 8))
    return lines + [""]


def utilization_section(results: Sequence[CaseResult]) -> list[str]:
    """FLOPs, MFU and the telemetry the workers sampled over the measured windows."""
    rows, reasons = report.utilization_rows(results)
    if not rows:
        return []
    lines = ["## FLOPs, MFU and utilization", "",
             "Over the measured windows. GPU utilization: NVML's busy time; CPU: the whole host "
             "(all CPUs = 100%); RSS: per worker process.", ""]
    lines += table(report.UTILIZATION_HEADER, rows, align_right=range(1, 6))
    lines += [""] + [f"{report.telemetry_note(reason)}." for reason in reasons]
    return lines + ([""] if reasons else []) + _telemetry_details(results)


def _telemetry_details(results: Sequence[CaseResult]) -> list[str]:
    """FLOPs per sample and peak, and the rest of the telemetry: GPU memory, power, clocks, disk, network."""
    rows = []
    for result in results:
        summaries = telemetry_summaries(result)
        flops = result.flops or {}
        if not result.measured or not (summaries or flops):
            continue
        memory, power = gpu_metric(summaries, "memory_used_bytes", "max"), \
            gpu_metric(summaries, "power_w", "mean")
        clock, temperature = gpu_metric(summaries, "sm_clock_mhz", "mean"), \
            gpu_metric(summaries, "temperature_c", "max")
        throttling = sorted({reason for s in summaries for d in (get_path(s, "gpu", "devices") or {}).values()
                             for reason in d.get("throttle_reasons") or []})
        host = lambda name, how="mean": host_metric(summaries, name, how)  # noqa: E731
        rows.append((
            result.id,
            f"{flops['flops_per_sample'] / 1e9:.3g}" if flops.get("flops_per_sample") is not None else "-",
            f"{flops['peak_tflops']:g}" if flops.get("peak_tflops") is not None else "-",
            fmt_bytes(memory) or "-", f"{power:.0f} W" if power is not None else "-",
            f"{clock:.0f} MHz" if clock is not None else "-",
            f"{temperature:.0f} °C" if temperature is not None else "-",
            ", ".join(throttling) or "-",
            f"{host('process_cpu_percent'):.0f}%" if host("process_cpu_percent") is not None else "-",
            f"{_rate(host('disk_read_bytes_per_s'))} / {_rate(host('disk_write_bytes_per_s'))}",
            f"{_rate(host('net_sent_bytes_per_s'))} / {_rate(host('net_recv_bytes_per_s'))}",
        ))
    if not rows:
        return []
    lines = ["### Per-case details", "",
             "GFLOP per sample: forward, loss and backward, 2 FLOPs per multiply-add. Peak: one device's "
             "dense TFLOP/s at the case's precision. Worker CPU: one core = 100%. Disk and network: the "
             "host's rates, read / write and sent / received.", ""]
    lines += table(["case", "GFLOP/sample", "peak TFLOP/s", "GPU memory max", "GPU power mean", "SM clock mean",
                    "GPU temp max", "clock throttling", "worker CPU mean", "disk read / write",
                    "network sent / received"], rows, align_right=(1, 2, 3, 4, 5, 6, 8, 9, 10))
    return lines + [""]


def verdicts_section(results: Sequence[CaseResult]) -> list[str]:
    """Every case's verdict and the first line of its message (the reason of a failure or skip)."""
    if not results:
        return []
    rows = [(r.id, r.verdict, verdicts.first_line(r.judgement or Judgement.of(r.verdict, r.message)))
            for r in results]
    return ["## Verdicts", ""] + table(["case", "verdict", "message"], rows) + [""]
