"""The Markdown report: a session's results laid out as the published benchmark reports are.

The seed reports (DLPerf, the PaddlePaddle and NGC reproduction reports) read: the
environment (hardware, software versions, ``nvidia-smi topo -m``), the method (warm-up
steps, measured steps, repeats, runs, the data), throughput tables whose rows are GPU
counts and whose columns are precision x batch size, speedup over one GPU, hardware
utilization, and links to each run's logs.  This module renders that from the session
results document (``--dlperf-json``, schema ``results.schema.json``), so that the plugin's
``--dlperf-report`` and ``dlperf report results.json`` share one renderer.

The figures and cells come from :mod:`pytest_dlperf.reporting.summary`, the terminal summary, so the
two never disagree.  Each run's log folder is copied next to the report (``report.md`` ->
``report-logs/``) and linked relatively, so the report and its logs can be moved or
published together.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import jsonio
from ..results import gpu_metric, host_metric, telemetry_summaries
from . import summary as report
from ..verdict import fmt_pct, fmt_value

Record = Mapping[str, Any]

# The method's parameters: (key in a case's "parameters", what it means).
METHOD_PARAMETERS = (
    ("warmup_steps", "warm-up steps per run, not timed"),
    ("steps", "steps per measured window"),
    ("repeats", "measured windows per run (repeats)"),
    ("runs", "runs per case: fresh worker processes, their windows pooled"),
    ("device", "device"),
    ("launcher", "launcher of the ranks"),
)

# Environment rows: (label, path into the environment document).
HOST_ROWS = (
    ("hostname", ("host", "hostname")),
    ("operating system", ("host", "os")),
    ("kernel", ("host", "kernel")),
    ("CPU", ("host", "cpu")),
)
VERSION_LABELS = {
    "python": "Python", "pytest": "pytest", "pytest-dlperf": "pytest-dlperf", "torch": "PyTorch",
    "torchvision": "torchvision", "transformers": "transformers", "dali": "DALI", "dali_package": "DALI wheel", "nvidia-ml-py": "nvidia-ml-py",
    "cuda": "CUDA (PyTorch build)", "cudnn": "cuDNN", "nccl": "NCCL", "driver": "NVIDIA driver",
}


# --------------------------------------------------------------------------- Markdown primitives


def escape(text: Any) -> str:
    """A table cell's text: one line, with the characters that would end the cell escaped."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")


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


def _get(document: Mapping[str, Any] | None, *path: str) -> Any:
    """``document[path[0]][path[1]]...``, or None where any step is missing or not a mapping."""
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _bytes(value: Any) -> str | None:
    if not isinstance(value, (int, float)):
        return None
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f} MiB/s"


# --------------------------------------------------------------------------- logs


@dataclasses.dataclass
class RunLogs:
    """One run's log folder: where the results say it is, where it was found, where the report links."""

    case_id: str
    attempt: int
    run: int
    recorded: str
    source: Path | None  # None: not found where the results say
    files: list[str] = dataclasses.field(default_factory=list)  # logs and results, relative to the folder
    target: str | None = None  # the link's folder, relative to the report

    @property
    def relative(self) -> str:
        """Where the run's folder goes inside the logs folder."""
        return f"{self.case_id}/attempt{self.attempt}/run{self.run}"


def logs_folder(report_path: str | os.PathLike) -> Path:
    """The folder that holds a report's logs: ``out/report.md`` -> ``out/report-logs``."""
    path = Path(report_path)
    return path.with_name(f"{path.stem}-logs")


def find_runs(document: Mapping[str, Any], search_dirs: Sequence[str | os.PathLike]) -> list[RunLogs]:
    """Every run of every attempt of every case, with its log folder resolved.

    A relative ``log_dir`` is relative to the directory pytest ran in; the first of
    ``search_dirs`` where it exists wins (the plugin passes its working directory, the
    CLI also the results file's folder).
    """
    runs = []
    for rec in document.get("cases", []):
        for a, attempt in enumerate(rec.get("attempts") or []):
            for position, run in enumerate(attempt.get("runs") or []):
                recorded = run.get("log_dir")
                if not recorded:
                    continue
                candidates = [Path(recorded)] if os.path.isabs(recorded) else \
                    [Path(d) / recorded for d in search_dirs]
                source = next((c for c in candidates if c.is_dir()), None)
                entry = RunLogs(rec["id"], a, run.get("index", position), recorded, source)
                if source is not None:
                    entry.files = _log_files(source)
                runs.append(entry)
    return runs


def _log_files(folder: Path) -> list[str]:
    """The files worth a link in a run folder: every ``*.log`` (ranks' too) and the results."""
    found = [p for p in folder.rglob("*") if p.is_file() and (p.suffix == ".log" or p.name.startswith("result"))]
    return sorted((p.relative_to(folder).as_posix() for p in found), key=lambda r: (r.count("/"), r))


def _reuse_earlier_copies(runs: Sequence[RunLogs], folder: Path) -> None:
    """Runs whose folders are gone (a cleaned-up basetemp) but are in an earlier copy: copy that one.

    So rendering the report of the same results again never drops logs it had copied.
    """
    for run in runs:
        earlier = folder / run.relative
        if run.source is None and earlier.is_dir():
            run.source = earlier
            run.files = _log_files(earlier)


def copy_logs(runs: Sequence[RunLogs], dest: Path) -> None:
    """Copy every found run folder into ``dest`` (replacing it), without losing anything on failure.

    The copy is made in a temporary folder beside ``dest`` and swapped in only when it is
    complete: a failure (a full disk, a vanished file) leaves the previous ``dest`` and the
    sources as they were, and raises :class:`OSError`.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        for run in runs:
            if run.source is not None:
                shutil.copytree(run.source, staging / run.relative, symlinks=True)
        _swap_in(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, dest: Path) -> None:
    """Rename ``staging`` to ``dest``; an existing ``dest`` is set aside first and removed last."""
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
    try:
        os.replace(staging, dest)
    except BaseException:
        if old is not None:
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- sections


def _title(document: Mapping[str, Any]) -> list[str]:
    """The heading and one paragraph: when, where, against what, and how the cases fared."""
    env = document.get("environment") or {}
    records = document.get("cases") or []
    device = _device_text(env.get("device"))
    host = _get(env, "host", "hostname") or "unknown host"
    lines = ["# Training throughput report", "",
             f"Created {document.get('created', 'at an unknown time')} by pytest-dlperf "
             f"{_get(env, 'versions', 'pytest-dlperf') or ''} on {host} ({device}).".replace("  ", " ")]
    baseline = document.get("baseline")
    if baseline:
        source = f" (source: {baseline['source']})" if baseline.get("source") else ""
        lines.append(f"Baseline: `{baseline.get('path', '?')}`{source}.")
    lines.append(f"{len(records)} case(s): {report.verdict_counts(records) or 'none'}.")
    return lines + [""]


def _device_text(device: Mapping[str, Any] | None) -> str:
    if not device:
        return "unknown device"
    name = device.get("name")
    kind = device.get("type", "unknown device")
    return f"{kind}: {name}" if name else kind


def _environment(env: Mapping[str, Any]) -> list[str]:
    """Host, GPUs, software versions and git, as a two-column table; missing facts are left out."""
    rows = [(label, _get(env, *path)) for label, path in HOST_ROWS]
    cores = _get(env, "host", "cpu_cores")
    threads = _get(env, "host", "cpu_count")
    if threads is not None or cores is not None:
        rows.append(("CPU cores / threads", f"{cores if cores is not None else 'unknown'} / "
                                            f"{threads if threads is not None else 'unknown'}"))
    rows.append(("memory", _bytes(_get(env, "host", "memory_bytes"))))
    rows.extend(_gpu_rows(env.get("gpus")))
    rows.append(("measured on", _device_text(env.get("device"))))
    versions = env.get("versions") or {}
    rows.extend((VERSION_LABELS[key], versions.get(key)) for key in VERSION_LABELS)
    rows.extend((key, value) for key, value in versions.items() if key not in VERSION_LABELS)
    rows.append(("git", _git_text(env.get("git"))))
    lines = ["## Environment", ""]
    lines.extend(table(["item", "value"], [(label, value) for label, value in rows if value not in (None, "")]))
    return lines + [""] + _topology(env)


def _gpu_rows(gpus: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """GPU count and model, each device with its memory, driver and CUDA driver; or why there are none."""
    if not isinstance(gpus, Mapping):
        return []
    if not gpus.get("count"):
        reason = gpus.get("reason") or "none found"
        return [("GPUs", f"none ({reason})")]
    rows: list[tuple[str, Any]] = [("GPUs", f"{gpus['count']} x {gpus.get('model') or 'unknown model'}")]
    for device in gpus.get("devices") or []:
        memory = _bytes(device.get("memory_bytes"))
        rows.append((f"GPU {device.get('index', '?')}",
                     f"{device.get('name', 'unknown')}" + (f", {memory}" if memory else "")))
    rows.append(("NVIDIA driver / CUDA driver API", f"{gpus.get('driver') or 'unknown'} / "
                                                    f"{gpus.get('cuda_driver') or 'unknown'}"))
    return rows


def _git_text(git: Mapping[str, Any] | None) -> str | None:
    if not isinstance(git, Mapping) or not (git.get("commit") or git.get("short")):
        return None
    text = str(git.get("commit") or git.get("short"))
    if git.get("branch"):
        text += f" ({git['branch']})"
    if git.get("dirty"):
        text += ", with uncommitted changes"
    return text


def _topology(env: Mapping[str, Any]) -> list[str]:
    """``nvidia-smi topo -m`` as a code block, or the reason it is missing; nothing if never collected."""
    topology = env.get("topology")
    if not isinstance(topology, Mapping):
        return []
    lines = ["### GPU topology", ""]
    if topology.get("text"):
        lines += ["```", "nvidia-smi topo -m", str(topology["text"]).rstrip(), "```"]
    else:
        lines.append(f"Unknown: {topology.get('reason') or 'not collected'}.")
    return lines + [""]


def _distinct(records: Sequence[Record], value: Callable[[Record], Any]) -> str:
    """One value when every case agrees, else each value with the cases that used it."""
    by_value: dict[str, list[str]] = {}
    for rec in records:
        by_value.setdefault(str(value(rec)), []).append(rec["id"])
    if len(by_value) == 1:
        return next(iter(by_value))
    return "; ".join(f"{v} ({', '.join(ids) if len(ids) <= 3 else f'{len(ids)} cases'})"
                     for v, ids in by_value.items())


def _data_backend(rec: Record) -> str:
    """Where a case's batches came from: its ``data`` setting, else synthetic (one batch, on the device)."""
    runs = [run for attempt in rec.get("attempts") or [] for run in attempt.get("runs") or []]
    effective = next((run["settings"].get("data") for run in runs if run.get("settings")), None)
    return (rec["case"].get("settings") or {}).get("data") or effective or "synthetic"


def _method(document: Mapping[str, Any]) -> list[str]:
    """How the figures were taken: the step counts, runs, data, device and how cases are judged."""
    measured = [r for r in document.get("cases") or [] if r.get("parameters")]
    lines = ["## Method", "",
             "Every step is real training (forward, loss, backward, optimizer step). Each run is a "
             "fresh process: it skips the warm-up steps, then times windows of steps between device "
             "synchronizations. A window's throughput is its samples over its seconds; a case's figure is "
             "the median of all windows of all its runs. Multi-GPU cases are data-parallel (DDP): the "
             "global batch over the slowest rank's time.", ""]
    if not measured:
        return lines + ["No case was measured.", ""]
    rows = [(meaning, _distinct(measured, lambda r, k=key: r["parameters"].get(k, "unknown")))
            for key, meaning in METHOD_PARAMETERS]
    rows.append(("data", _distinct(measured, _data_backend)))
    options = document.get("options") or {}
    if "confirm" in options:
        rows.append(("re-measurements of a case below its baseline before it fails", options["confirm"]))
    rows.append(("tolerance", _distinct(measured, lambda r: fmt_pct(r["baseline"]["tolerance"])
                                        if r.get("baseline") else "no baseline")))
    lines.extend(table(["parameter", "value"], rows))
    return lines + [""]


def _throughput(records: Sequence[Record]) -> list[str]:
    """Per model: the throughput grid, then the speedup grid when a multi-GPU case has one."""
    lines = ["## Throughput", "",
             "Rows are GPUs (ranks), columns precision x per-GPU batch size. Cells: measured / baseline "
             "(difference); FAIL: below the baseline's tolerance, +: above it, ERROR: not measured.", ""]
    for grid in report.model_grids(records):
        rows = [[gpus] + [report.cell(grid.records[gpus][col]) if col in grid.records[gpus] else ""
                          for col in grid.columns] for gpus in grid.gpu_counts]
        lines += [f"### {grid.model} ({grid.unit})", ""]
        lines += table(["GPUs", *grid.columns], rows, align_right=range(len(grid.columns) + 1)) + [""]
        if grid.scaled_columns:
            lines += _speedup(grid)
    return lines


def _speedup(grid: report.ModelGrid) -> list[str]:
    """The speedup grid of one model, and which 1-GPU figures it divides by."""
    rows = [[gpus] + [(report.speedup_cell(grid.records[gpus][col]) or "") if col in grid.records[gpus] else ""
                      for col in grid.columns] for gpus in grid.gpu_counts]
    scalings = [rec["scaling"] for row in grid.records.values() for rec in row.values() if rec.get("scaling")]
    sources = sorted({s["reference_source"] for s in scalings})
    minima = sorted({s["minimum"] for s in scalings if s.get("minimum") is not None})
    gate = f" Cases below {', '.join(fmt_pct(m) for m in minima)} efficiency are marked FAIL." if minima else ""
    lines = [f"Speedup over 1 GPU (efficiency = speedup / GPUs); the 1-GPU figure is from "
             f"{' and '.join(sources)}.{gate}", ""]
    lines += table(["GPUs", *grid.columns], rows, align_right=range(len(grid.columns) + 1))
    return lines + [""]


def _comparison(document: Mapping[str, Any]) -> list[str]:
    """Each case against its baseline entry, in percent, with where the baseline figure comes from."""
    records = document.get("cases") or []
    baseline = document.get("baseline")
    lines = ["## Comparison with the baseline", ""]
    if baseline:
        hardware = "; ".join(f"{k}: {v}" for k, v in (baseline.get("hardware") or {}).items())
        lines += [f"Baseline `{baseline.get('path', '?')}`: {baseline.get('source') or 'no source given'}"
                  + (f" (hardware: {hardware})" if hardware else "") + ".", ""]
    compared = [r for r in records if r.get("baseline")]
    if not compared:
        return lines + ["No case has a baseline entry.", ""]
    rows = [(r["id"], fmt_value(r["throughput"]) if r.get("throughput") is not None else "-",
             fmt_value(r["baseline"]["throughput"]),
             f"{100 * r['difference']:+.1f}%" if r.get("difference") is not None else "-",
             f"±{fmt_pct(r['baseline']['tolerance'])}", r.get("throughput_verdict") or r["verdict"],
             r["baseline"].get("source") or "-") for r in compared]
    lines += table(["case", "measured", "baseline", "difference", "tolerance", "verdict", "source"], rows,
                   align_right=(1, 2, 3, 4))
    missing = [r["id"] for r in records if not r.get("baseline") and r.get("throughput") is not None]
    if missing:
        lines += ["", f"No baseline entry: {', '.join(missing)}."]
    return lines + [""]


def _statistics(records: Sequence[Record]) -> list[str]:
    """The windows' spread per measured case: how far the median can be trusted."""
    measured = [r for r in records if r.get("stats")]
    if not measured:
        return []
    rows = [(r["id"], r["stats"]["n"], fmt_value(r["stats"]["median"]), fmt_value(r["stats"]["min"]),
             fmt_value(r["stats"]["max"]), fmt_pct(r["stats"]["cv"]), len(r.get("attempts") or []),
             f"{r['duration']:.1f} s" if isinstance(r.get("duration"), (int, float)) else "-")
            for r in measured]
    lines = ["## Windows", ""]
    lines += table(["case", "windows", "median", "min", "max", "CV", "attempts", "duration"], rows,
                   align_right=range(1, 8))
    return lines + [""]


def _utilization(records: Sequence[Record]) -> list[str]:
    """FLOPs, MFU and the telemetry the workers sampled over the measured windows."""
    rows, reasons = report.utilization_rows(records)
    if not rows:
        return []
    lines = ["## FLOPs, MFU and utilization", "",
             "Over the measured windows. GPU utilization: NVML's busy time; CPU: the whole host "
             "(all CPUs = 100%); RSS: per worker process.", ""]
    lines += table(report.UTILIZATION_HEADER, rows, align_right=range(1, 6))
    lines += [""] + [f"{report.telemetry_note(reason)}." for reason in reasons]
    return lines + ([""] if reasons else []) + _telemetry_details(records)


def _telemetry_details(records: Sequence[Record]) -> list[str]:
    """FLOPs per sample and peak, and the rest of the telemetry: GPU memory, power, clocks, disk, network."""
    rows = []
    for rec in records:
        summaries = telemetry_summaries(rec)
        flops = rec.get("flops") or {}
        if rec.get("throughput") is None or not (summaries or flops):
            continue
        memory, power = gpu_metric(summaries, "memory_used_bytes", "max"), \
            gpu_metric(summaries, "power_w", "mean")
        clock, temperature = gpu_metric(summaries, "sm_clock_mhz", "mean"), \
            gpu_metric(summaries, "temperature_c", "max")
        throttling = sorted({reason for s in summaries for d in (_get(s, "gpu", "devices") or {}).values()
                             for reason in d.get("throttle_reasons") or []})
        host = lambda name, how="mean": host_metric(summaries, name, how)  # noqa: E731
        rows.append((
            rec["id"],
            f"{flops['flops_per_sample'] / 1e9:.3g}" if flops.get("flops_per_sample") is not None else "-",
            f"{flops['peak_tflops']:g}" if flops.get("peak_tflops") is not None else "-",
            _bytes(memory) or "-", f"{power:.0f} W" if power is not None else "-",
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


def _verdicts(records: Sequence[Record]) -> list[str]:
    """Every case's verdict and the first line of its message (the reason of a failure or skip)."""
    if not records:
        return []
    rows = [(r["id"], r["verdict"], (r.get("message") or "").splitlines()[0] if r.get("message") else "")
            for r in records]
    return ["## Verdicts", ""] + table(["case", "verdict", "message"], rows) + [""]


def _logs(runs: Sequence[RunLogs], note: str | None) -> list[str]:
    """One line per run: its folder and its log files, linked relative to the report."""
    if not runs:
        return []
    lines = ["## Logs", ""]
    if note:
        lines += [note, ""]
    for run in runs:
        where = f"**{run.case_id}**, attempt {run.attempt}, run {run.run}"
        if run.target is None:
            lines.append(f"- {where}: not found at `{run.recorded}`")
            continue
        files = [link(_file_label(f), f"{run.target}/{f}") for f in run.files]
        lines.append(f"- {where}: " + " · ".join([link("folder", run.target + "/"), *files]))
    return lines + [""]


def _file_label(relative: str) -> str:
    """``stderr.log``; a rank's own log (``ranks/.../1/stderr.log``) reads ``rank 1 stderr.log``."""
    parts = relative.split("/")
    if len(parts) > 1 and parts[-2].isdigit():
        return f"rank {parts[-2]} {parts[-1]}"
    return relative


# --------------------------------------------------------------------------- entry points


def render(document: Mapping[str, Any], runs: Sequence[RunLogs] = (), logs_note: str | None = None) -> str:
    """The report's Markdown for a results document; ``runs`` with their link targets set."""
    records = document.get("cases") or []
    lines = _title(document)
    lines += _environment(document.get("environment") or {})
    lines += _method(document)
    lines += _throughput(records)
    lines += _comparison(document)
    lines += _statistics(records)
    lines += _utilization(records)
    lines += _verdicts(records)
    lines += _logs(runs, logs_note)
    return "\n".join(lines).rstrip() + "\n"


@dataclasses.dataclass
class Written:
    """What :func:`write_report` did: the report, its logs folder, and why logs were not copied."""

    path: Path
    logs: Path | None
    runs: int
    problem: str | None = None


def render_linked(document: Mapping[str, Any], runs: Sequence[RunLogs], base: str | os.PathLike,
                  copied: Path | None = None, problem: str | None = None) -> str:
    """The report with each run linked relative to ``base`` (the report's folder): inside ``copied``,
    the logs folder, when the logs were copied; else at their original folders."""
    base = Path(base).resolve()
    for run in runs:
        if run.source is not None:
            run.target = f"{copied.name}/{run.relative}" if copied is not None else \
                Path(os.path.relpath(run.source.resolve(), base)).as_posix()
    if copied is not None:
        folder = copied.name + "/"
        note = f"Each run's folder (spec, stdout, stderr, results) is copied to {link(folder, folder)}."
    else:
        note = "Links point to the original log folders" + (f": {problem}." if problem else ".")
    return render(document, runs, note)


def write_report(document: Mapping[str, Any], path: str | os.PathLike, *,
                 search_dirs: Sequence[str | os.PathLike] = (".",), copy: bool = True) -> Written:
    """Copy the runs' logs next to ``path`` and write the report there atomically.

    The logs folder is replaced only by a complete copy.  When the copy fails, the report
    links the original folders instead and says why; when ``copy`` is false it always does.
    """
    jsonio.validate(document, "results")
    target = Path(path)
    runs = find_runs(document, search_dirs)
    folder = logs_folder(target)
    problem = None
    if copy:
        _reuse_earlier_copies(runs, folder)
    found = any(run.source is not None for run in runs)
    if copy and found:
        try:
            copy_logs(runs, folder)
        except OSError as exc:
            problem = f"the logs could not be copied to {folder}: {exc}"
    copied = folder if copy and found and problem is None else None
    target.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_atomic(target, render_linked(document, runs, target.parent, copied, problem))
    return Written(target, copied, len(runs), problem)
