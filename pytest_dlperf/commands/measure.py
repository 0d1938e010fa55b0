"""Measuring a command case: fresh runs of the command through a launcher, its log read into windows.

The method is the built-in cases' (:mod:`pytest_dlperf.runs`): skip the first
``warmup_steps`` logged steps, group the next ones into ``repeats`` windows of ``steps``
logged steps, a window's throughput being its samples over its seconds (never a mean of
per-step rates), and the case's figure the median of all windows of all runs.  Where each
rank logs, a window is the median of the ranks' (``scope: global``, every rank prints the
job's figure) or their sum (``scope: rank``).  A log with only a final figure (the
``final`` parser, or a DLLogger summary line) gives one figure per run, and the result says so.

Each run is one process group with a time limit (:func:`pytest_dlperf.process.run_command`);
a crash, an out-of-memory error and a timeout are told apart from the exit status and the log.
"""

from __future__ import annotations

import socket
import statistics
from pathlib import Path
from typing import Any

from .. import process
from ..cases import Case
from ..launchers import Launcher, LocalLauncher
from ..runs import Attempt, CaseError, RunParams, status_text
from ..stats import summarize
from . import parsers
from .spec import CommandSpec

#: Default time limit of one run when neither --dlperf-timeout nor the command gives one: a
#: command reports no progress, so the limit cannot adapt to its step time as a worker's does.
DEFAULT_TIMEOUT = 1800.0
#: Out-of-memory errors as frameworks print them.
OOM_MARKERS = ("out of memory", "outofmemoryerror", "std::bad_alloc", "resource_exhausted", "memoryerror",
               "cannot allocate memory")
FINAL_NOTE = "one final figure per run: the script's own average over its whole run (its warm-up included)"


def read_records(parser: parsers.Parser, paths: list[Path]) -> tuple[list[parsers.Record], Path | None]:
    """The records of the first of ``paths`` that has any (stdout before stderr: a script that prints to both
    is not counted twice), and that file."""
    for path in paths:
        if not path.exists():
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            records = [r for line in handle for r in parser.parse_line(line)]
        if records:
            return records, path
    return [], None


def windows_of(records: list[parsers.Record], warmup: int, steps: int, repeats: int,
               samples_per_step: float) -> list[dict[str, Any]]:
    """``repeats`` windows of ``steps`` steps after ``warmup`` steps (fewer when the log ends sooner)."""
    out = []
    for index in range(repeats):
        chunk = records[warmup + index * steps: warmup + (index + 1) * steps]
        if len(chunk) < steps:
            break
        samples = sum(r.samples or samples_per_step for r in chunk)
        seconds = sum(r.step_time if r.step_time is not None else (r.samples or samples_per_step) / r.throughput
                      for r in chunk)
        out.append({"steps": steps, "samples": round(samples), "seconds": seconds,
                    "throughput": samples / seconds})
    return out


def _combine(per_rank: dict[int, list[dict[str, Any]]], scope: str, world: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The job's windows from each logging rank's: their median (global figures) or their sum (per-rank ones)."""
    ranks = sorted(per_rank)
    count = min(len(per_rank[r]) for r in ranks)
    notes = []
    if scope == "rank" and len(ranks) < world:
        notes.append(f"{len(ranks)} of {world} ranks logged per-rank figures: the job's figure is their mean x {world}")
    out = []
    for index in range(count):
        figures = [per_rank[r][index]["throughput"] for r in ranks]
        if scope == "rank":
            total = sum(figures) if len(ranks) == world else statistics.fmean(figures) * world
        else:
            total = statistics.median(figures)
        first = per_rank[ranks[0]][index]
        samples = first["samples"] * (world if scope == "rank" else 1)
        out.append({"steps": first["steps"], "samples": samples, "seconds": samples / total, "throughput": total})
    return out, notes


class _Run:
    """One run of the command: its files, and what its log says."""

    def __init__(self, spec: CommandSpec, case: Case, params: RunParams, run_dir: Path, launcher: Launcher):
        self.spec, self.case, self.params, self.run_dir, self.launcher = spec, case, params, run_dir, launcher
        self.argv = spec.argv(case, params, str(run_dir))
        self.parser = parsers.make(spec.parser, spec.parser_options)

    def logs(self, rank: int) -> list[Path]:
        """Where rank ``rank``'s lines are: the command's log file, its own files, else the run's."""
        if self.spec.log_file:
            return [Path(self.spec.fill(self.spec.log_file, self.case, self.params, str(self.run_dir)))] \
                if rank == 0 else []
        own = [self.launcher.rank_stdout(self.run_dir, rank), self.launcher.rank_stderr(self.run_dir, rank)]
        if self.case.gpus > 1 and any(own):
            return [p for p in own if p is not None]
        return [self.run_dir / "stdout.log", self.run_dir / "stderr.log"] if rank == 0 else []

    def records(self) -> tuple[dict[int, list[parsers.Record]], list[Path]]:
        """Each rank's records (by the rank its file or line names), and the files read."""
        by_rank: dict[int, list[parsers.Record]] = {}
        read: list[Path] = []
        for rank in range(self.case.gpus):
            found, path = read_records(self.parser, self.logs(rank))
            if path is not None:
                read.append(path)
            for record in found:
                by_rank.setdefault(record.rank if record.rank is not None else rank, []).append(record)
        return by_rank, read


def _log_tail(paths: list[Path]) -> str:
    blocks = [f"\n--- last lines of {p} ---\n{process.tail(p)}" for p in paths if process.tail(p)]
    return "".join(blocks[:2])


def _failure(run: _Run, outcome: process.CommandOutcome) -> tuple[str, str]:
    """(kind, message) for a run that ended without success: timeout, out of memory, or a crash."""
    case, launcher = run.case, run.launcher
    paths = [outcome.run_dir / "stderr.log", outcome.run_dir / "stdout.log"]
    reported = launcher.failed_rank(process.tail(paths[0], 200)) if case.gpus > 1 else None
    who = "the command"
    if reported is not None:
        who = f"rank {reported[0]} of the command"
        paths = [p for p in (launcher.rank_stderr(outcome.run_dir, reported[0]),
                             launcher.rank_stdout(outcome.run_dir, reported[0])) if p] + paths
    if outcome.timed_out:
        return "timeout", (f"{case.id}: timed out after {outcome.time_limit:.0f} s (--dlperf-timeout, else the "
                           f"command's timeout, else {DEFAULT_TIMEOUT:.0f} s); its process group was killed"
                           f"{_log_tail(paths)}")
    text = " ".join(process.tail(p, 60).lower() for p in paths)
    if any(marker in text for marker in OOM_MARKERS):
        return "oom", (f"{case.id}: out of memory at batch size {case.batch_size}: {who} ended with "
                       f"{status_text(outcome.returncode)}{_log_tail(paths)}")
    return "crash", f"{case.id}: {who} ended with {status_text(outcome.returncode)}{_log_tail(paths)}"


def _run_record(index: int, run: _Run, outcome: process.CommandOutcome, windows: list[dict[str, Any]],
                ranks: list[dict[str, Any]], method: str, warnings: list[str]) -> dict[str, Any]:
    """One run as the session results keep it: the same keys as a worker's run, with the command line."""
    ok = outcome.returncode == 0 and not outcome.timed_out and bool(windows)
    return {"index": index, "returncode": outcome.returncode,
            "status": "ok" if ok else ("timeout" if outcome.timed_out else "crashed"),
            "wall_seconds": round(outcome.wall_seconds, 3), "log_dir": str(outcome.run_dir),
            "device": {"type": run.params.device}, "windows": windows, "timing": {}, "final_loss": None,
            "warnings": warnings, "settings": run.spec.settings(run.case.settings_dict), "memory_cap": None,
            "telemetry": None, "flops": None, "data": None, "ranks": ranks,
            "command": {"argv": run.argv, "cwd": run.spec.cwd, "env": dict(run.spec.env), "parser": run.spec.parser,
                        "method": method}}


def _measured(run: _Run, by_rank: dict[int, list[parsers.Record]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, list[str]]:
    """(windows, per-rank records, method, notes) of a run whose log has records; ([], ...) when too few."""
    params, spec, case = run.params, run.spec, run.case
    steps = {r: [x for x in recs if not x.final] for r, recs in by_rank.items()}
    steps = {r: recs for r, recs in steps.items() if recs}
    if not steps:
        finals = [x for recs in by_rank.values() for x in recs if x.final]
        last = finals[-1].throughput
        return [{"steps": 0, "samples": 0, "seconds": 0.0, "throughput": last}], [], "final", [FINAL_NOTE]
    per_step = spec.samples(case, params, str(run.run_dir))
    if spec.scope == "rank":
        per_step = per_step / case.gpus
    per_rank = {r: windows_of(recs, params.warmup_steps, params.steps, params.repeats, per_step)
                for r, recs in steps.items()}
    if not all(per_rank.values()):
        return [], [], "windows", []
    windows, notes = _combine(per_rank, spec.scope, case.gpus)
    host = socket.gethostname()
    ranks = [{"rank": r, "host": host, "device": run.params.device,
              "throughput": summarize([w["throughput"] for w in ws]).median, "windows": ws,
              "telemetry": None, "data": None} for r, ws in sorted(per_rank.items())] if len(per_rank) > 1 else []
    if len(windows) < params.repeats:
        notes.append(f"the log had {len(windows)} full window(s) of {params.steps} logged steps, not {params.repeats}")
    return windows, ranks, "windows", notes


def _too_few(run: _Run, by_rank: dict[int, list[parsers.Record]], read: list[Path]) -> str:
    params = run.params
    counts = ", ".join(f"rank {r}: {len(v)}" for r, v in sorted(by_rank.items()))
    return (f"{run.case.id}: the {run.spec.parser} parser read too few logged steps ({counts}) in "
            f"{', '.join(map(str, read))}: {params.warmup_steps} warm-up + {params.steps} per window needs at least "
            f"{params.warmup_steps + params.steps}; make the script run {{steps}} steps and log every step")


def measure(case: Case, spec: CommandSpec, params: RunParams, workdir: Path,
            launcher: Launcher | None = None, on_progress=None, first_index: int = 0) -> Attempt:
    """Run ``params.runs`` fresh runs of ``spec``'s command for ``case``; raise :class:`CaseError` if one fails.

    The same signature and result as :func:`pytest_dlperf.runs.measure`, so the session judges,
    re-measures and reports a command case as any other.  ``on_progress`` is not called: a
    command reports no progress of its own.  ``first_index``: the index of the first run (the
    session measures one run at a time, :mod:`pytest_dlperf.sequential`).
    """
    launcher = launcher or LocalLauncher()
    timeout = params.timeout or spec.timeout or DEFAULT_TIMEOUT
    runs: list[dict[str, Any]] = []
    for index in range(first_index, first_index + params.runs):
        run_dir = workdir / f"run{index}"
        run_dir.mkdir(parents=True, exist_ok=True)
        run = _Run(spec, case, params, run_dir, launcher)
        ranks = case.gpus if spec.launch == "launcher" else 1  # "command": it starts its own ranks
        plan = launcher.plan(ranks, params.device, run_dir, program=run.argv)
        cwd = spec.fill(spec.cwd, case, params, str(run_dir))
        outcome = process.run_command(plan.command, run_dir, timeout=timeout, extra_env={**plan.env, **spec.env},
                                      cwd=cwd)
        by_rank, read = run.records() if outcome.returncode == 0 and not outcome.timed_out else ({}, [])
        windows, ranks, method, notes = _measured(run, by_rank) if by_rank else ([], [], "windows", [])
        runs.append(_run_record(index, run, outcome, windows, ranks, method, notes))
        if outcome.returncode != 0 or outcome.timed_out:
            kind, message = _failure(run, outcome)
            raise CaseError(message, kind, runs)
        if not by_rank:
            logs = [p for r in range(case.gpus) for p in run.logs(r)]
            raise CaseError(f"{case.id}: the {spec.parser} parser found no usable line in the command's log: it "
                            f"looked for {run.parser.describe()}{_log_tail([p for p in logs if p.exists()])}",
                            "error", runs)
        if not windows:
            raise CaseError(_too_few(run, by_rank, read), "error", runs)
    return Attempt.from_runs(runs, spec.unit, {"type": params.device})
