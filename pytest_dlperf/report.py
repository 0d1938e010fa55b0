"""The terminal summary: one table per model, as the seed reports lay them out.

Rows are GPU counts, columns precision x batch size (and settings); each cell holds the
measured median, the baseline and the difference in percent, with FAIL / ERROR / +
(improved) marks.  Below the tables: FLOPs and utilization per case (TFLOP/s, MFU, GPU
and CPU utilization, peak RSS, from the workers' telemetry), then regressions,
improvements, cases without a baseline and skipped cases, each with its one-line reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .cases import Case
from .verdict import FAIL, IMPROVED, NO_BASELINE, PASS, fmt_value

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

NO_GPU_REQUESTED = "no GPU requested"


def telemetry_summaries(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The record's telemetry summaries: one, or one per rank; none when telemetry was off."""
    telemetry = record.get("telemetry")
    if not telemetry:
        return []
    return list(telemetry) if isinstance(telemetry, list) else [telemetry]


def gpu_utilizations(summaries: Iterable[Mapping[str, Any]]) -> list[tuple[int | None, float, float]]:
    """(rank, mean %, max %) of NVML's GPU utilization of every sampled GPU."""
    out = []
    for summary in summaries:
        for device in summary.get("gpu", {}).get("devices", {}).values():
            util = device.get("utilization_gpu")
            if util:
                out.append((summary.get("rank"), util["mean"], util["max"]))
    return out


def gpu_unavailable_reason(summaries: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a case that sampled GPUs has no GPU figures (NVML missing, ...); None otherwise."""
    for summary in summaries:
        gpu = summary.get("gpu", {})
        if not gpu.get("available") and gpu.get("reason") not in (None, NO_GPU_REQUESTED):
            return gpu["reason"]
    return None


def host_metric(summaries: Iterable[Mapping[str, Any]], name: str, how: str) -> float | None:
    """A host metric over the ranks: the mean of their means (``how="mean"``) or the highest max."""
    values = [s["host"][name][how] for s in summaries if name in s.get("host", {})]
    if not values:
        return None
    return max(values) if how == "max" else sum(values) / len(values)


def _fmt_tflops(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def utilization_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "FLOPs and utilization" section, and once per session why GPU telemetry was unavailable."""
    measured = [r for r in records if r.get("throughput") is not None and (r.get("flops") or r.get("telemetry"))]
    if not measured:
        return []
    rows = []
    reasons: list[str] = []
    for rec in measured:
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
    lines = ["FLOPs and utilization (over the measured windows; CPU: whole host, RSS: per worker process)"]
    lines.extend(render_table(["case", "TFLOP/s", "MFU", "GPU util mean / max", "CPU util mean", "RSS max"],
                              rows, align_right=(1, 2, 3, 4, 5)))
    for reason in reasons:
        what = reason if reason.startswith("unavailable") else f"unavailable: {reason}"
        lines.append(f"telemetry: GPU {what} (host metrics only)")
    lines.append("")
    return lines


def summary_lines(records: Sequence[Mapping[str, Any]], baseline_path: str | None = None) -> list[str]:
    by_model: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        by_model[rec["case"]["model"]].append(rec)
    lines: list[str] = []
    for model, recs in by_model.items():
        units = {r["unit"] for r in recs if r.get("unit")}
        unit = units.pop() if len(units) == 1 else "throughput"
        columns: list[str] = []
        grid: dict[int, dict[str, str]] = defaultdict(dict)
        scaled: set[str] = set()
        for rec in recs:
            case = Case.from_dict(rec["case"])
            col = _column(case, rec.get("max_batch"))
            if col not in columns:
                columns.append(col)
            grid[case.gpus][col] = cell(rec)
            if rec.get("scaling"):
                scaled.add(col)
                grid[case.gpus][col + " speedup"] = scaling_cell(rec["scaling"])
            elif case.gpus == 1 and rec.get("throughput") is not None:
                grid[1][col + " speedup"] = "1.00x"
        header = [c for col in columns for c in ([col, col + " speedup"] if col in scaled else [col])]
        lines.append(f"{model} ({unit}; measured / baseline (difference); speedup over 1 GPU (efficiency))")
        rows = [[str(g)] + [grid[g].get(c, "") for c in header] for g in sorted(grid)]
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
    remeasured = [r for r in records if r.get("verdict") == PASS and len(r.get("attempts", [])) > 1]
    if remeasured:
        # Passed, but only on re-measurement: worth a look before it becomes a regression.
        lines.append(f"passed on re-measurement ({len(remeasured)}):")
        lines.extend(f"  {r['message'].splitlines()[0]}" for r in remeasured)
    section("skipped", ("skipped",))
    counts = defaultdict(int)
    for rec in records:
        counts[rec.get("verdict", "?")] += 1
    lines.append("dlperf: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return lines
