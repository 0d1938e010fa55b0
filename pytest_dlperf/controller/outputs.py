"""What a session leaves behind: the results document, the report, the plots, a saved baseline, the summary.

At the end of a session (:func:`write_outputs`) the typed results become one results
document (``--dlperf-json``; :func:`results_document`).  The Markdown report renders that
document with the typed results, the plots and the terminal summary read the typed
results; ``--dlperf-save-baseline`` writes the measured medians as a baseline.  The
terminal summary (:func:`terminal_summary`) comes after pytest's own.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .. import baseline as baseline_mod
from .. import environment, jsonio
from ..baseline import machines
from ..commands import trust
from ..gate.rules import VERDICT_RULES
from ..gate.tolerance import Noisy, summary_line
from ..ab import report as ab_report
from . import history as history_hooks
from ..reporting import markdown, plots, summary
from ..results.case import CaseResult, as_dicts
from .pipeline import Pipeline


@dataclasses.dataclass
class Outputs:
    """What the session wrote, for the terminal summary."""

    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    plot_files: list[Path] = dataclasses.field(default_factory=list)
    plot_notes: list[str] = dataclasses.field(default_factory=list)
    history: history_hooks.Recorded | None = None  # --dlperf-history: what was written, the gate's findings


def session_environment(pipeline: Pipeline) -> dict[str, Any]:
    """The controller's machine, the device the first measured case ran on and the machine's name, if given."""
    env = environment.collect(pipeline.config.rootpath)
    devices = [r.device for r in pipeline.results if r.device]
    requested = pipeline.options.device
    if devices:
        env["device"] = devices[0]
    elif requested != "auto":
        env["device"] = {"type": requested}
    else:
        env["device"] = {"type": pipeline.runner.probed_device or "unknown"}
    if pipeline.options.machine:
        env["machine"] = pipeline.options.machine  # --dlperf-machine: the history rows' machine class
    return env


def hardware_mismatch(pipeline: Pipeline) -> str | None:
    """The first judged case's note that the baseline was measured on another GPU model or device."""
    return next((r.hardware_mismatch for r in pipeline.results if r.hardware_mismatch), None)


def results_document(pipeline: Pipeline, env: dict[str, Any]) -> dict[str, Any]:
    """The ``--dlperf-json`` document (``schemas/results.schema.json``)."""
    base = pipeline.baseline
    if base is not None and base.entries and all(e.unjudged for e in base.entries):
        base = None  # a folder with no file for this machine: nothing was judged against a baseline
    document = {
        "schema_version": 1,
        "kind": "dlperf-results",
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "verdict_rules": VERDICT_RULES,
        "environment": env,
        "options": pipeline.options.to_dict(),
        "baseline": None if base is None else {
            "path": base.path, "source": base.source, "hardware": dict(base.hardware),
            "hardware_mismatch": hardware_mismatch(pipeline)},
        "cases": as_dicts(pipeline.results),
    }
    if base is not None and base.selection is not None:
        document["baseline"]["selection"] = base.selection.line()
    document.update(ab_report.document(pipeline.ab))  # an A/B session's "against"
    return document


def write_outputs(pipeline: Pipeline, outputs: Outputs, exitstatus: int | pytest.ExitCode) -> bool:
    """``--dlperf-history``, ``--dlperf-json``, ``--dlperf-report``, ``--dlperf-plot``, ``--dlperf-save-baseline`` and
    ``--dlperf-history-html``, in that order.

    The paths were checked before the first case (:meth:`~pytest_dlperf.options.Options.check_outputs`).
    A write that still fails is said in one line and the others are written; when the results
    document is what failed, it is kept in the session's log folder, which the line names.
    Returns whether every output was written.
    """
    opts = pipeline.options
    outputs.environment = session_environment(pipeline)
    document = results_document(pipeline, outputs.environment)
    ok = True
    history_ok = True

    def attempt(option: str, write) -> None:
        nonlocal ok
        try:
            write()
        except (OSError, jsonio.DocumentError) as exc:
            ok = False
            kept = f"; the results are kept in {_keep_results(pipeline, document)}" if option == "--dlperf-json" else ""
            _say(pipeline.config, f"dlperf: {option} not written: {exc}{kept}", red=True)

    if opts.history_url and exitstatus != pytest.ExitCode.INTERRUPTED:
        analyze = bool(opts.history_gate or (opts.report_path and not history_hooks.changepoints.missing("")))
        attempt("--dlperf-history", lambda: setattr(outputs, "history", history_hooks.record(
            opts, pipeline.runner.probed_device or opts.device, pipeline.results, outputs.environment, document,
            analyze=analyze)))
        history_ok = not (opts.history_gate and outputs.history and outputs.history.gate_failures)
    if opts.json_path:
        attempt("--dlperf-json", lambda: jsonio.dump(opts.json_path, document, "results"))
    if opts.report_path:
        attempt("--dlperf-report", lambda: _write_report(pipeline.config, opts.report_path, document, pipeline.results))
    if opts.plot_dir:
        try:
            outputs.plot_files = plots.write_plots(pipeline.results, Path(opts.plot_dir), outputs.plot_notes)
        except OSError as exc:
            outputs.plot_notes.append(f"plots not written: {exc}")
    if opts.save_baseline:
        attempt("--dlperf-save-baseline", lambda: _save_baseline(pipeline, outputs.environment, exitstatus))
    selection = pipeline.baseline.selection if pipeline.baseline is not None else None
    if selection is not None and selection.record_path is not None and exitstatus != pytest.ExitCode.INTERRUPTED:
        attempt("dlperf_baseline_record", lambda: _record_machine(pipeline, outputs.environment))
    return ok and history_ok


def _keep_results(pipeline: Pipeline, document: dict[str, Any]) -> Path:
    """The results document in the session's log folder (where the workers' logs are)."""
    path = pipeline.runner.workdir / "results.json"
    jsonio.dump(path, document, "results")
    return path


def _say(config: pytest.Config, line: str, **markup: bool) -> None:
    if (tr := _terminal(config)) is not None:
        tr.write_line(line, **markup)


def _terminal(config: pytest.Config):
    return config.pluginmanager.get_plugin("terminalreporter")


def _write_report(config: pytest.Config, path: str, document: dict[str, Any], results: list[CaseResult]) -> None:
    """The Markdown report, from the same document as ``--dlperf-json``, with the runs' logs beside it."""
    written = markdown.write_report(document, path, search_dirs=(os.getcwd(),), cases=results)
    tr = _terminal(config)
    if tr is None:
        return
    logs = f"; logs in {written.logs}" if written.logs else ""
    tr.write_line(f"dlperf: wrote the report {written.path}{logs}")
    if written.problem:
        tr.write_line(f"dlperf: {written.problem}; the report links the original log folders", yellow=True)


def _save_baseline(pipeline: Pipeline, env: dict[str, Any], exitstatus: int | pytest.ExitCode) -> None:
    tr = _terminal(pipeline.config)
    path = pipeline.options.save_baseline
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        if tr:
            tr.write_line(f"dlperf: session interrupted; {path} not written", red=True)
        return
    saved = [r for r in pipeline.results if r.measured and r.unsaved is None]  # one per entry, in order
    measured = [r.to_dict() for r in saved]
    unsaved = [r for r in pipeline.results if r.measured and r.unsaved is not None]
    steps = {k: v for k, v in params_summary(pipeline.results).items() if v is not None}
    tolerance = pipeline.options.tolerance or baseline_mod.DEFAULT_TOLERANCE
    noisy_cases: list[Noisy] = []
    commands = pipeline.baseline.commands if pipeline.baseline is not None else None
    document = baseline_mod.from_measurements(measured, env, tolerance=tolerance, steps=steps,
                                              noisy_cases=noisy_cases, commands=commands,
                                              max_runs=pipeline.options.max_runs)
    replaced = _replaced_baseline(path)
    slower = _slower_host(pipeline, saved, replaced, env, document)
    kept = _keep_replaced_entries(replaced, unsaved, document)
    if tr:
        for result in unsaved:
            kept_note = "; the entry of the file it replaces is kept" if result.id in kept else ""
            tr.write_line(f"dlperf: --dlperf-save-baseline: {result.id} {result.unsaved.split(':')[0]}"
                          f"{kept_note}", red=True)
    if unsaved and not document["cases"]:
        if tr:
            tr.write_line(f"dlperf: no case to save; {path} not written", red=True)
        return
    baseline_mod.save(path, document)
    if tr:
        for found in noisy_cases:
            tr.write_line(f"dlperf: --dlperf-save-baseline: {found.line()}", yellow=True)
        tr.write_line(f"dlperf: saved {len(measured)} case(s) as a baseline to {path}{trust.kept_note(document)}")
        remedy = (f", or judge against the store's last sessions (--dlperf-baseline-from-history "
                  f"{history_hooks.SAVE_REFERENCE_SESSIONS})" if pipeline.options.history_url else
                  ", or from several sessions (dlperf baseline update FILE --from each session's results)")
        for case_id, reason in slower:
            tr.write_line(f"dlperf: --dlperf-save-baseline: {case_id} was measured while the host ran slower: "
                          f"{reason}; a slowdown that size can pass against its figure: save it again when the "
                          f"host is quieter{remedy}", yellow=True)
        if noisy_cases:
            tr.write_line(f"dlperf: {summary_line(len(measured), noisy_cases, tolerance)}", yellow=True)


def _replaced_baseline(path: str) -> baseline_mod.Baseline | None:
    """The baseline a save replaces at ``path``, or None (no file, or not a baseline: replaced all the same)."""
    if not os.path.exists(path):
        return None
    try:
        return baseline_mod.load(path)
    except (OSError, jsonio.DocumentError):
        return None


def _keep_replaced_entries(replaced: baseline_mod.Baseline | None, unsaved: list,
                           document: dict[str, Any]) -> set[str]:
    """The entries of the file being replaced for the cases this save leaves out (too few quiet runs), added to
    ``document`` so that a save on a busy machine loses nothing it had; the ids of those kept."""
    if replaced is None:
        return set()
    kept = set()
    for result in unsaved:
        entry = replaced.find(result.case)
        if entry is not None:
            document["cases"].append(replaced.data["cases"][entry.index])
            kept.add(result.id)
    return kept


def _slower_host(pipeline: Pipeline, saved: list, replaced: baseline_mod.Baseline | None, env: dict[str, Any],
                 document: dict[str, Any]) -> list[tuple[str, str]]:
    """The cases of a baseline being saved (``saved``, one per entry of ``document``) whose host probes read low
    enough to cost them their tolerance (:func:`pytest_dlperf.baseline.slower_host`) against those of the
    baseline they were judged against, of their last sessions in the history store, or of the entry they replace
    (``replaced``, measured on this machine): ``(case id, why)``, each also noted in its entry.
    """
    isa = (env.get("host") or {}).get("cpu_isa")
    if replaced is not None and (replaced.measured_on is None or
                                 replaced.device_mismatch(env.get("device") or {}, isa)):
        replaced = None  # another machine's figures say nothing about this host's minute
    history = pipeline.references.history_references
    default = document["defaults"]["tolerance"]
    found = []
    for result, entry in zip(saved, document["cases"]):
        references = []
        if result.baseline is not None:
            references.append(baseline_mod.ProbeReference("its baseline's", result.baseline.memory_gbs,
                                                           result.baseline.core_gflops))
        past = history.baselines.get(result.id) if history is not None else None
        if past is not None:
            references.append(baseline_mod.ProbeReference(
                f"the median of its last {len(past.figures)} session(s) here (--dlperf-history),",
                past.memory_gbs, past.core_gflops))
        old = replaced.find(result.case) if replaced is not None else None
        if old is not None:
            references.append(baseline_mod.ProbeReference("the entry it replaces,", old.memory_gbs, old.core_gflops))
        # Where no run counted (every one busy, for the host's sake too), the probes of all of them: a host far
        # slower than the judged baseline's makes every run busy, and that is the minute to say so.
        probes = {key: entry.get(key) or (result.evidence.probe_median(key, busy_too=True) if result.evidence else None)
                  for key in baseline_mod.PROBE_FIELDS}
        reason = baseline_mod.slower_host(probes, references, entry.get("tolerance", default))
        if reason:
            baseline_mod.add_slower_host_note(entry, reason)
            found.append((result.id, reason))
    return found


def _record_machine(pipeline: Pipeline, env: dict[str, Any]) -> None:
    """The cases of a baseline folder that had no figure for this machine, recorded for the next session."""
    selection = pipeline.baseline.selection
    count, noisy_cases = machines.record(pipeline.baseline, pipeline.results, env,
                                         pipeline.options.tolerance or baseline_mod.DEFAULT_TOLERANCE,
                                         pipeline.options.max_runs)
    if count:
        noisy = (f"; {len(noisy_cases)} too noisy for their tolerance to be decided within --dlperf-max-runs"
                 if noisy_cases else "")
        _say(pipeline.config, f"dlperf: recorded {count} case(s) of this machine ({selection.machine.describe()}) "
                             f"in {selection.recorded}{noisy}; the next session of {selection.folder} here gates "
                             "against them")


def terminal_summary(pipeline: Pipeline, outputs: Outputs, terminalreporter) -> None:
    """The ``dlperf summary`` section: the tables, the notes and where the plots and logs are."""
    if not pipeline.results:
        return
    terminalreporter.write_sep("=", "dlperf summary")
    selection = pipeline.baseline.selection if pipeline.baseline is not None else None
    label = pipeline.baseline.path if pipeline.baseline else None
    if selection is not None and selection.how == "none":
        label = f"{selection.folder} for this machine"
    elif selection is not None and selection.how == "another":
        label = f"{selection.folder}, measured on another machine"
    # Split to fit a terminal; a log (CI's) has no width to fit, and keeps one table per model.
    width = shutil.get_terminal_size().columns if terminalreporter.isatty() else None
    for line in summary.summary_lines(pipeline.results, label, width=width) + ab_report.summary_lines(pipeline.results):
        terminalreporter.write_line(line)
    if selection is not None and terminalreporter.verbosity < 0:
        terminalreporter.write_line(f"dlperf: {selection.line()}")  # -q: the header that says it was not shown
    mismatch = hardware_mismatch(pipeline)
    if mismatch:
        terminalreporter.write_line(f"dlperf: {mismatch}", yellow=True)
    if pipeline.options.plot_dir:
        names = ", ".join(p.name for p in outputs.plot_files) or "none"
        terminalreporter.write_line(f"dlperf: {len(outputs.plot_files)} plot(s) in "
                                    f"{Path(pipeline.options.plot_dir).resolve()}: {names}")
        for note in outputs.plot_notes:
            terminalreporter.write_line(f"  {note}")
    if outputs.history is not None:
        for line in outputs.history.lines:
            terminalreporter.write_line(line)
        gate = "--dlperf-history-gate fails the session" if pipeline.options.history_gate else "not gated"
        for line in outputs.history.gate_failures:
            terminalreporter.write_line(f"dlperf: {line} ({gate})", red=bool(pipeline.options.history_gate),
                                        yellow=not pipeline.options.history_gate)
    if pipeline.runner.workdir_if_made is not None:
        terminalreporter.write_line(f"dlperf: worker logs in {pipeline.runner.workdir_if_made}")


def header_lines(pipeline: Pipeline) -> list[str]:
    """pytest's header: the device (what ``auto`` resolved to), the baseline, and this machine in one line."""
    src = f"baseline {pipeline.options.baseline_path}" if pipeline.options.baseline_path else "no baseline"
    if pipeline.baseline is not None and pipeline.baseline.selection is not None:
        src = pipeline.baseline.selection.line()  # which file of the folder, and why
    device = pipeline.options.device
    if device == "auto":
        choice = pipeline.runner.device_choice
        device = (f"auto -> cuda ({choice.cuda_count} visible)" if choice.kind == "cuda" else
                  "auto -> cpu (no CUDA device is visible: every case trains on the CPU)")
    env = environment.collect(pipeline.config.rootpath)
    return [f"dlperf: device {device}, {src}", f"dlperf: {header_line(env)}"]


def params_summary(results: list[CaseResult]) -> dict[str, int | None]:
    """Each step count shared by every measured case of the session (None where they differ)."""
    params = [r.parameters for r in results if r.parameters]
    out: dict[str, int | None] = {}
    for key in baseline_mod.STEP_DEFAULTS:
        values = {p[key] for p in params}
        out[key] = values.pop() if len(values) == 1 else None
    return out


# -- this machine in one line, for pytest's header


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.0f} GiB" if value else "? GiB"


def gpu_text(gpus: dict[str, Any]) -> str:
    """ "8 x NVIDIA H100 80GB HBM3, driver 550.54.15 (CUDA 12.4)" or "no GPU: NVML library not found"."""
    if not gpus.get("count"):
        return f"no GPU: {gpus.get('reason') or 'none found'}"
    text = f"{gpus['count']} x {gpus['model']}"
    if gpus.get("driver"):
        text += f", driver {gpus['driver']}"
        if gpus.get("cuda_driver"):
            text += f" (CUDA {gpus['cuda_driver']})"
    return text


def software_text(versions: dict[str, Any]) -> str:
    """ "torch 2.4.0, CUDA 12.4, cuDNN 9.1.0" (or "CPU-only torch")."""
    parts = [f"torch {versions.get('torch')}"]
    if versions.get("cuda"):
        parts.append(f"CUDA {versions['cuda']}")
        if versions.get("cudnn"):
            parts.append(f"cuDNN {versions['cudnn']}")
    else:
        parts.append("CPU-only torch")
    return ", ".join(parts)


def host_text(host: dict[str, Any]) -> str:
    """ "AMD EPYC 7B13, 16 CPUs (8 cores), 125 GiB"."""
    cores = f" ({host['cpu_cores']} cores)" if host.get("cpu_cores") else ""
    return f"{host.get('cpu')}, {host.get('cpu_count')} CPUs{cores}, {_gib(host.get('memory_bytes'))}"


def git_text(git: dict[str, Any] | None) -> str:
    """ "git 3976bea0c1+dirty" or "not a git checkout"."""
    if not git:
        return "not a git checkout"
    return f"git {git['short']}{'+dirty' if git.get('dirty') else ''}"


def header_line(env: dict[str, Any]) -> str:
    """One line for pytest's header: GPUs and driver; torch/CUDA/cuDNN; CPU and memory; git commit."""
    gpus = env.get("gpus") or {}
    return "; ".join([gpu_text(gpus), software_text(env.get("versions", {})), host_text(env.get("host", {})),
                      git_text(env.get("git"))])
