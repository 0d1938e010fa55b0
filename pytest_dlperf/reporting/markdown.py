"""The Markdown report: a session's results laid out as the published benchmark reports are.

The seed reports (DLPerf, the PaddlePaddle and NGC reproduction reports) read: the
environment (hardware, software versions, ``nvidia-smi topo -m``), the method (warm-up
steps, measured steps, repeats, runs, the data), throughput tables whose rows are GPU
counts and whose columns are precision x batch size, speedup over one GPU, hardware
utilization, and links to each run's logs.  This module renders that from the session
results document (``--dlperf-json``, schema ``results.schema.json``), so that the plugin's
``--dlperf-report`` and ``dlperf report results.json`` share one renderer.

This module holds the document's own parts (the title, the environment, the logs) and
the entry points; the document's cases are read once as typed records
(:func:`pytest_dlperf.results.case.cases_from`) and the sections about them are rendered by
:mod:`pytest_dlperf.reporting.markdown_tables`.  Each run's log folder is copied next to
the report (``report.md`` -> ``report-logs/``) and linked relatively, so the report and its
logs can be moved or published together.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ab import report as ab_report
from .. import jsonio
from ..environment import strip_ansi
from ..history import text as history_text
from ..results.case import CaseResult, cases_from
from . import convergence, explain
from . import summary as report
from .markdown_tables import (comparison_section, fmt_bytes, get_path, link, method_section, table,
                              throughput_section, utilization_section, verdicts_section, windows_section)

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
        """Where the run's folder goes inside the logs folder (a setting's text in the id cannot lead out of it)."""
        name = re.sub(r"[^A-Za-z0-9_.+=-]", "_", self.case_id).replace("..", "__")
        return f"{name}/attempt{self.attempt}/run{self.run}"


def logs_folder(report_path: str | os.PathLike) -> Path:
    """The folder that holds a report's logs: ``out/report.md`` -> ``out/report-logs``."""
    path = Path(report_path)
    return path.with_name(f"{path.stem}-logs")


def find_runs(results: Sequence[CaseResult], search_dirs: Sequence[str | os.PathLike]) -> list[RunLogs]:
    """Every run of every attempt of every case, with its log folder resolved.

    A relative ``log_dir`` is relative to the directory pytest ran in; the first of
    ``search_dirs`` where it exists wins (the plugin passes its working directory, the
    CLI also the results file's folder); a folder that is no run's (:func:`is_run_folder`) is not found.
    """
    runs = []
    for result in results:
        for a, attempt in enumerate(result.attempts):
            for run in attempt.runs:
                recorded = run.log_dir
                if not recorded:
                    continue
                candidates = [Path(recorded)] if os.path.isabs(recorded) else \
                    [Path(d) / recorded for d in search_dirs]
                source = next((c for c in candidates if is_run_folder(c)), None)
                entry = RunLogs(result.id, a, run.index, recorded, source)
                if source is not None:
                    entry.files = _log_files(source)
                runs.append(entry)
    return runs


#: What every run folder holds (:func:`pytest_dlperf.launch.process.run_process` makes both).
RUN_LOGS = ("stdout.log", "stderr.log")


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's folder (it holds its stdout.log or stderr.log): a results file is data, and a
    ``log_dir`` in it that names another folder (``~/.ssh``) is neither copied nor linked."""
    return folder.is_dir() and any((folder / name).is_file() and not (folder / name).is_symlink() for name in RUN_LOGS)


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


# --------------------------------------------------------------------------- the document's sections


def _title(document: Mapping[str, Any], results: Sequence[CaseResult]) -> list[str]:
    """The heading and one paragraph: when, where, against what, and how the cases fared."""
    env = document.get("environment") or {}
    device = _device_text(env.get("device"))
    host = get_path(env, "host", "hostname") or "unknown host"
    lines = ["# Training throughput report", "",
             f"Created {document.get('created', 'at an unknown time')} by pytest-dlperf "
             f"{get_path(env, 'versions', 'pytest-dlperf') or ''} on {host} ({device}).".replace("  ", " ")]
    baseline = document.get("baseline")
    if baseline:
        source = f" (source: {baseline['source']})" if baseline.get("source") else ""
        lines.append(f"Baseline: `{baseline.get('path', '?')}`{source}.")
    lines.append(f"{len(results)} case(s): {report.verdict_counts(results) or 'none'}.")
    return lines + [""]


def _device_text(device: Mapping[str, Any] | None) -> str:
    if not device:
        return "unknown device"
    name = device.get("name")
    kind = device.get("type", "unknown device")
    return f"{kind}: {name}" if name else kind


def _environment(env: Mapping[str, Any]) -> list[str]:
    """Host, GPUs, software versions and git, as a two-column table; missing facts are left out."""
    rows = [(label, get_path(env, *path)) for label, path in HOST_ROWS]
    cores = get_path(env, "host", "cpu_cores")
    threads = get_path(env, "host", "cpu_count")
    if threads is not None or cores is not None:
        rows.append(("CPU cores / threads", f"{cores if cores is not None else 'unknown'} / "
                                            f"{threads if threads is not None else 'unknown'}"))
    rows.append(("memory", fmt_bytes(get_path(env, "host", "memory_bytes"))))
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
        memory = fmt_bytes(device.get("memory_bytes"))
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
        # strip_ansi: results written before 2026-11-26 kept nvidia-smi's underline codes.
        lines += ["```", "nvidia-smi topo -m", strip_ansi(str(topology["text"])).rstrip(), "```"]
    else:
        lines.append(f"Unknown: {topology.get('reason') or 'not collected'}.")
    return lines + [""]


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
            lines.append(f"- {where}: no run's log folder at `{run.recorded}`")
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


def render(document: Mapping[str, Any], runs: Sequence[RunLogs] = (), logs_note: str | None = None, *,
           cases: Sequence[CaseResult] | None = None, curves: Mapping[str, str] | None = None) -> str:
    """The report's Markdown for a results document; ``runs`` with their link targets set.

    ``cases``: the document's cases as typed records, when the caller has them already;
    ``curves``: each model's learning-curve PNG relative to the report, where written.
    """
    results = cases_from(document) if cases is None else cases
    lines = _title(document, results)
    lines += _environment(document.get("environment") or {})
    lines += ab_report.markdown_section(document["against"], results) if document.get("against") else []
    lines += method_section(results, document.get("options") or {})
    lines += throughput_section(results)
    lines += comparison_section(results, document.get("baseline"))
    lines += windows_section(results)
    lines += explain.phases_section(results)
    lines += explain.markdown_section(results)
    lines += utilization_section(results)
    lines += convergence.markdown_section(results, curves)
    lines += verdicts_section(results)
    lines += history_text.markdown_section(document.get("history"))
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
                  copied: Path | None = None, problem: str | None = None, *,
                  cases: Sequence[CaseResult] | None = None, curves: Mapping[str, str] | None = None) -> str:
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
    return render(document, runs, note, cases=cases, curves=curves)


def write_report(document: Mapping[str, Any], path: str | os.PathLike, *,
                 search_dirs: Sequence[str | os.PathLike] = (".",), copy: bool = True,
                 cases: Sequence[CaseResult] | None = None) -> Written:
    """Copy the runs' logs next to ``path`` and write the report there atomically.

    The logs folder is replaced only by a complete copy.  When the copy fails, the report
    links the original folders instead and says why; when ``copy`` is false it always does.
    ``cases``: the document's cases as typed records, when the caller has them already.
    """
    jsonio.validate(document, "results")
    results = cases_from(document) if cases is None else cases
    target = Path(path)
    runs = find_runs(results, search_dirs)
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
    curves = convergence.write_report_curves(results, target)
    jsonio.write_atomic(target, render_linked(document, runs, target.parent, copied, problem, cases=results,
                                              curves=curves))
    return Written(target, copied, len(runs), problem)
