"""Measuring a command case: fresh runs of the command through a launcher, its log read into windows.

The method is the built-in cases' (:mod:`pytest_dlperf.launch.workers`): skip the first
``warmup_steps`` logged steps, group the next ones into ``repeats`` windows of ``steps``
logged steps, a window's throughput being its samples over its seconds (never a mean of
per-step rates), and the case's figure the median of all windows of all runs.  Where the log gives
a step's phases (DLLogger's data time), a window's ``phases`` are their means.  Where each
rank logs, a window is the median of the ranks' (``scope: global``, every rank prints the
job's figure) or their sum (``scope: rank``).  A log with only a final figure (the
``final`` parser, or a DLLogger summary line) gives one figure per run, and the result says so.

Each run is one process group (:func:`pytest_dlperf.launch.process.run_command`), started under a
watching parent that takes it down if the controller dies (:mod:`.guard`), with a time limit
that follows its log as it grows (:mod:`.follow`) where ``dlperf_timeout`` or the command's
``timeout`` fixes none; a crash, an out-of-memory error, a hung command and a timeout are told
apart from the exit status and the log.  A script that trains on after the steps its case needs
(most train for epochs) is stopped as soon as each rank's log has them (``stop_once_measured``:
SIGINT to its process group, SIGKILL after the grace), and the run counts: its record says after how
many logged steps.  A time-to-train case's runs are :mod:`.train_time`'s, through the same :func:`execute`.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cases import Case
from ..launch import process, threads
from ..launch.launchers import Launcher, LocalLauncher
from ..launch.workers import CaseError, FailureKind, RunParams, status_text
from ..protocol import Progress
from ..results.runs import CommandLine, RankRecord, RunRecord, RunStatus
from ..worker.phases import Phases
from . import guard, parsers
from .follow import LogFollower
from .spec import CommandSpec
from .trust import RefusedCommand

#: Out-of-memory errors as frameworks print them.
OOM_MARKERS = ("out of memory", "outofmemoryerror", "std::bad_alloc", "resource_exhausted", "memoryerror",
               "cannot allocate memory")
FINAL_NOTE = "one final figure per run: the script's own average over its whole run (its warm-up included)"


@dataclasses.dataclass
class Read:
    """What one rank's log holds: its steps and marks (:mod:`.parsers`), the file, why its steps cannot be counted."""

    records: list[parsers.Record]
    marks: list[parsers.Mark]
    path: Path | None
    missing: str | None = None
    global_batch: int | None = None  # the global batch the log says it trained with (MLLOG's global_batch_size)


def read_records(make_parser: Callable[[], parsers.Parser], paths: list[Path]) -> Read:
    """The first of ``paths`` that has anything the parser reads (stdout before stderr: a script that prints to
    both is not counted twice), read from its start by a parser of its own (``make_parser()``)."""
    for path in paths:
        if not path.exists():
            continue
        parser = make_parser()
        with open(path, encoding="utf-8", errors="replace") as handle:
            records, marks = parser.parse(handle)
        if records or marks:
            return Read(records, marks, path, parser.missing(records), getattr(parser, "global_batch", None))
    return Read([], [], None)


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
        timed = window_phases(chunk, seconds / steps)
        out.append({"steps": steps, "samples": round(samples), "seconds": seconds,
                    "throughput": samples / seconds, **({"phases": timed.to_dict()} if timed is not None else {})})
    return out


def window_phases(chunk: list[parsers.Record], step_seconds: float) -> Phases | None:
    """A window's phases from its logged steps' (:attr:`parsers.Record.phases`): the mean of each phase every step
    of it logged, in seconds per step, never more together than the window's step time; None where none."""
    logged = [r.phases.named() if r.phases is not None else {} for r in chunk]
    names = set.intersection(*(set(each) for each in logged)) if logged else set()
    if not names:
        return None
    return Phases.within(step_seconds, **{name: sum(each[name] for each in logged) / len(logged) for name in names})


def combine_ranks(per_rank: dict[int, list[dict[str, Any]]], scope: str,
                  world: int) -> tuple[list[dict[str, Any]], list[str]]:
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
        timed = [per_rank[r][index] for r in ranks if "phases" in per_rank[r][index]]
        if timed:  # the slowest logging rank's, as a worker's windows on several ranks (worker/distributed.py)
            out[-1]["phases"] = min(timed, key=lambda window: window["throughput"])["phases"]
    return out, notes


class Run:
    """One run of the command (its ``index``-th): its command line, its files, and what its log says."""

    def __init__(self, spec: CommandSpec, case: Case, params: RunParams, run_dir: Path, launcher: Launcher,
                 index: int = 0):
        self.spec, self.case, self.params, self.run_dir, self.launcher = spec, case, params, run_dir, launcher
        self.index = index
        self.argv = spec.argv(case, params, str(run_dir), index)
        self.options = spec.parser_settings(case, params, str(run_dir), index)
        self.parser = self.make_parser()  # for its description in messages

    def make_parser(self) -> parsers.Parser:
        return parsers.make(self.spec.parser, self.options)

    def logs(self, rank: int) -> list[Path]:
        """Where rank ``rank``'s lines are: the command's log file, its own files, else the run's."""
        if self.spec.log_file:
            return [Path(self.spec.fill(self.spec.log_file, self.case, self.params, str(self.run_dir), self.index))] \
                if rank == 0 else []
        own = [self.launcher.rank_stdout(self.run_dir, rank), self.launcher.rank_stderr(self.run_dir, rank)]
        if self.case.gpus > 1 and any(own):
            return [p for p in own if p is not None]
        return [self.run_dir / "stdout.log", self.run_dir / "stderr.log"] if rank == 0 else []

    def rank_logs(self) -> list[list[Path]]:
        """Each rank's files, in the order they are read (:meth:`logs`)."""
        return [self.logs(rank) for rank in range(self.case.gpus)]

    def followed(self) -> list[Path]:
        """Every file its lines may be in while it runs (a launcher's per-rank files appear after its start)."""
        if self.spec.log_file:
            return self.logs(0)
        own = [self.launcher.rank_stdout(self.run_dir, r) for r in range(self.case.gpus)] + \
              [self.launcher.rank_stderr(self.run_dir, r) for r in range(self.case.gpus)]
        return [self.run_dir / "stdout.log", self.run_dir / "stderr.log", *(p for p in own if p is not None)]

    def samples(self) -> float:
        """Samples one logged step counts (of the whole job, or of one rank for ``scope: rank``)."""
        per_step = self.spec.samples(self.case, self.params, str(self.run_dir))
        return per_step / self.case.gpus if self.spec.scope == "rank" else per_step

    def read(self) -> dict[int, Read]:
        """Each logging rank's :class:`Read` (a record naming its rank goes to that rank's)."""
        out: dict[int, Read] = {}
        for rank in range(self.case.gpus):
            found = read_records(self.make_parser, self.logs(rank))
            if found.path is None:
                continue
            out.setdefault(rank, dataclasses.replace(found, records=[], marks=[])).marks.extend(found.marks)
            for record in found.records:
                target = record.rank if record.rank is not None else rank
                out.setdefault(target, dataclasses.replace(found, records=[], marks=[])).records.append(record)
        return out

    def batch_note(self, reads: dict[int, Read]) -> list[str]:
        """A note where the log says it trained with another global batch than the case's (a script that does not
        take ``{batch_size}``: the case's id would not say what ran)."""
        logged = {found.global_batch for found in reads.values() if found.global_batch is not None}
        case = self.case.batch_size * self.case.gpus
        return [f"the script logged global_batch_size {', '.join(map(str, sorted(logged)))}; the case's global "
                f"batch is {case} ({self.case.batch_size} x {self.case.gpus})"] if logged - {case} else []


def execute(run: Run, on_progress=None) -> tuple[process.CommandOutcome, LogFollower]:
    """Start ``run``'s command through the launcher, under :mod:`.guard`, and wait for it, its time limit
    following its log (:mod:`.follow`) where ``dlperf_timeout`` or the command's ``timeout`` fixes none."""
    spec, case, params = run.spec, run.case, run.params
    if spec.refused:  # the session skips its cases; nothing else may start it either
        raise RefusedCommand(spec.refused)
    ranks = case.gpus if spec.launch == "launcher" else 1  # "command": it starts its own ranks
    plan = run.launcher.with_env(run.launcher.plan(ranks, params.device, run.run_dir, program=run.argv),
                                 threads.environment(params.cpu_threads))
    cwd = spec.fill(spec.cwd, case, params, str(run.run_dir), run.index)
    expected = None if spec.times_training else params.warmup_steps + params.steps * params.repeats
    startup = spec.startup_timeout or params.startup_timeout
    follower = LogFollower(run.followed, run.make_parser, expected_steps=expected, startup=startup,
                           samples_per_step=run.samples())

    def follow() -> tuple[float, Progress]:
        follower.poll()
        return follower.deadline, follower.progress(params.warmup_steps, params.steps, params.repeats)

    def done() -> bool:
        return spec.stop_once_measured and follower.measured(run.rank_logs())

    outcome = process.run_command(guard.wrap(plan.command), run.run_dir, timeout=fixed_timeout(spec, params),
                                  startup_timeout=startup, extra_env={**plan.env, **spec.env}, cwd=cwd,
                                  on_progress=on_progress, follow=follow, done=done)
    return outcome, follower


def fixed_timeout(spec: CommandSpec, params: RunParams) -> float | None:
    """A fixed limit per run: ``dlperf_timeout``, else the command's ``timeout``; None: it follows the log."""
    return params.timeout or spec.timeout


def log_tail(paths: list[Path]) -> str:
    blocks = [f"\n--- last lines of {p} ---\n{process.tail(p)}" for p in paths if process.tail(p)]
    return "".join(blocks[:2])


def failure(run: Run, outcome: process.CommandOutcome, follower: LogFollower) -> tuple[FailureKind, str]:
    """(kind, message) for a run that ended without success: timeout or hung, out of memory, or a crash."""
    case, launcher = run.case, run.launcher
    paths = [outcome.run_dir / "stderr.log", outcome.run_dir / "stdout.log"]
    reported = launcher.failed_rank(process.tail(paths[0], 200)) if case.gpus > 1 else None
    who = "the command"
    if reported is not None:
        who = f"rank {reported[0]} of the command"
        paths = [p for p in (launcher.rank_stderr(outcome.run_dir, reported[0]),
                             launcher.rank_stdout(outcome.run_dir, reported[0])) if p] + paths
    if outcome.timed_out and fixed_timeout(run.spec, run.params) is not None:
        return FailureKind.TIMEOUT, (f"{case.id}: timed out after {outcome.time_limit:.0f} s (dlperf_timeout, else "
                                     f"the command's timeout); its process group was killed{log_tail(paths)}")
    if outcome.timed_out:
        return FailureKind.TIMEOUT, (f"{case.id}: the command {follower.hung(outcome.time_limit)}; its process group "
                                     f"was killed{log_tail(paths)}")
    text = " ".join(process.tail(p, 60).lower() for p in paths)
    if any(marker in text for marker in OOM_MARKERS):
        return FailureKind.OOM, (f"{case.id}: out of memory at batch size {case.batch_size}: {who} ended with "
                       f"{status_text(outcome.returncode)}{log_tail(paths)}")
    return FailureKind.CRASH, f"{case.id}: {who} ended with {status_text(outcome.returncode)}{log_tail(paths)}"


def run_record(index: int, run: Run, outcome: process.CommandOutcome, windows: list[dict[str, Any]],
               ranks: list[RankRecord], method: str, warnings: list[str], logged: int | None = None) -> RunRecord:
    """One run as the session results keep it: a worker's run's record, with the command line (and, for a run
    stopped once measured, the logged steps it had then: ``logged``)."""
    ok = outcome.ok and bool(windows)
    status = RunStatus.OK if ok else (RunStatus.TIMEOUT if outcome.timed_out else RunStatus.CRASHED)
    stopped_after = logged if outcome.stopped and logged else None
    if stopped_after:
        warnings = [*warnings, stop_note(stopped_after, run)]
    return RunRecord(index, status, outcome.returncode, round(outcome.wall_seconds, 3), str(outcome.run_dir),
                     device={"type": run.params.device}, windows=windows, warnings=warnings,
                     settings=run.spec.settings(run.case.settings_dict), ranks=ranks,
                     command=CommandLine(tuple(run.argv), run.spec.cwd, dict(run.spec.env), run.spec.parser, method,
                                         stopped_after))


def stop_note(logged: int, run: Run) -> str:
    """The words of a run stopped once measured."""
    needed = run.params.warmup_steps + run.params.steps * run.params.repeats
    return (f"stopped after {logged} logged steps (the case needs {needed}: it was still training; "
            f"stop_once_measured)")


def _measured(run: Run, by_rank: dict[int, list[parsers.Record]]) -> tuple[list[dict[str, Any]], list[RankRecord], str,
                                                                           list[str]]:
    """(windows, per-rank records, method, notes) of a run whose log has records; ([], ...) when too few."""
    params, spec, case = run.params, run.spec, run.case
    steps = {r: [x for x in recs if not x.final] for r, recs in by_rank.items()}
    steps = {r: recs for r, recs in steps.items() if recs}
    if not steps:
        finals = [x for recs in by_rank.values() for x in recs if x.final]
        last = finals[-1].throughput
        return [{"steps": 0, "samples": 0, "seconds": 0.0, "throughput": last}], [], "final", [FINAL_NOTE]
    per_step = run.samples()
    per_rank = {r: windows_of(recs, params.warmup_steps, params.steps, params.repeats, per_step)
                for r, recs in steps.items()}
    if not all(per_rank.values()):
        return [], [], "windows", []
    windows, notes = combine_ranks(per_rank, spec.scope, case.gpus)
    host = socket.gethostname()
    ranks = [RankRecord(r, host, run.params.device, ws) for r, ws in sorted(per_rank.items())] \
        if len(per_rank) > 1 else []
    if len(windows) < params.repeats:
        notes.append(f"the log had {len(windows)} full window(s) of {params.steps} logged steps, not {params.repeats}")
    return windows, ranks, "windows", notes


def _too_few(run: Run, by_rank: dict[int, list[parsers.Record]], read: list[Path]) -> str:
    params = run.params
    counts = ", ".join(f"rank {r}: {len(v)}" for r, v in sorted(by_rank.items()))
    return (f"{run.case.id}: the {run.spec.parser} parser read too few logged steps ({counts}) in "
            f"{', '.join(map(str, read))}: {params.warmup_steps} warm-up + {params.steps} per window needs at least "
            f"{params.warmup_steps + params.steps}; make the script run {{steps}} steps and log every step")


def measure(case: Case, spec: CommandSpec, params: RunParams, workdir: Path,
            launcher: Launcher | None = None, on_progress=None, first_index: int = 0) -> list[RunRecord]:
    """Run ``params.runs`` fresh runs of ``spec``'s command for ``case``, their records in order; raise
    :class:`CaseError` if one fails.

    The same signature and result as :func:`pytest_dlperf.launch.workers.measure`, so the session judges,
    re-measures and reports a command case as any other.  ``on_progress(run_index, runs,
    progress, elapsed)`` is called about once a second with where the run's log is
    (:meth:`LogFollower.progress`).
    ``first_index``: the index of the first run (the session measures one run at a time,
    :mod:`pytest_dlperf.gate.sequential`).
    """
    launcher = launcher or LocalLauncher()
    runs: list[RunRecord] = []
    for index in range(first_index, first_index + params.runs):
        run_dir = workdir / f"run{index}"
        run_dir.mkdir(parents=True, exist_ok=True)
        run = Run(spec, case, params, run_dir, launcher, index)
        shown = None if on_progress is None else functools.partial(on_progress, index, first_index + params.runs)
        outcome, follower = execute(run, shown)
        reads = run.read() if outcome.ok else {}
        missing = next((found.missing for found in reads.values() if found.missing), None)
        by_rank = {r: found.records for r, found in reads.items() if found.records and not missing}
        windows, ranks, method, notes = _measured(run, by_rank) if by_rank else ([], [], "windows", [])
        logged = min((sum(not r.final for r in records) for records in by_rank.values()), default=None)
        runs.append(run_record(index, run, outcome, windows, ranks, method, notes + run.batch_note(reads), logged))
        if not outcome.ok:
            kind, message = failure(run, outcome, follower)
            raise CaseError(message, kind, runs)
        if missing:
            raise CaseError(f"{case.id}: the {spec.parser} parser cannot count the steps of "
                            f"{next(f.path for f in reads.values() if f.missing)}: {missing}", FailureKind.ERROR, runs)
        if not by_rank:
            logs = [p for r in range(case.gpus) for p in run.logs(r)]
            raise CaseError(f"{case.id}: the {spec.parser} parser found no usable line in the command's log: it "
                            f"looked for {run.parser.describe()}{log_tail([p for p in logs if p.exists()])}",
                            FailureKind.ERROR, runs)
        if not windows:
            raise CaseError(_too_few(run, by_rank, [found.path for found in reads.values()]), FailureKind.ERROR, runs)
    return runs
