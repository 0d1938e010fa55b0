"""Time-to-train command cases: a script that trains to its own target, judged by the time it took.

MLPerf Training scores a run by its time to train: from the ``run_start`` event to the
``run_stop`` event, whose ``status`` must be ``success`` (the target reached; ``aborted``
otherwise) (https://github.com/mlcommons/training_policies/blob/master/training_rules.adoc).
A command registered with ``figure="time_to_train"`` is such a case:

* each run is a fresh run of the command (:func:`pytest_dlperf.commands.measure.execute`: the
  launcher, the watching parent, the time limit that follows the log), ``{seed}`` its index;
* its figure is ``run_stop - run_start`` of the first rank that logs them (MLLOG's
  ``time_ms``), or the seconds a ``regex`` group ``time_to_train`` or a DLLogger
  ``time_to_train_key`` reads; its ``eval_accuracy`` events are its learning curve;
* a run whose ``run_stop`` says another status, or that never logs ``run_stop``, did not
  reach its target: the case fails, saying so, and no further run is started;
* the runs' times are judged as a built-in convergence case's are (the geometric mean and its
  interval against the entry's ``time_to_target``, lower is better:
  :func:`pytest_dlperf.convergence.verdict.judge_time`), and recorded alike
  (:func:`pytest_dlperf.controller.convergence.record_time`): the report's time-to-accuracy section shows them.
  The case kind that runs them is :class:`pytest_dlperf.controller.command.TimeToTrainKind`.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from .. import models
from ..cases import Case
from ..convergence.figures import RunFigures
from ..launch.launchers import Launcher
from ..launch.workers import CaseError, FailureKind, RunParams
from ..results.runs import RunRecord
from .measure import Read, Run, execute, failure, log_tail, run_record
from .parsers import Mark, Milestone
from .spec import CommandSpec

#: The goal of a time-to-train command, in words (MLPerf's mllog: ``run_stop`` with ``status`` ``success``).
GOAL = "run_stop with status success"
SUCCESS = "success"
#: The metric of a command's learning curve: MLPerf's ``eval_accuracy``.
METRIC = "eval_accuracy"


def _of(marks: list[Mark], milestone: Milestone) -> list[Mark]:
    return [m for m in marks if m.milestone is milestone]


def run_figures(index: int, found: Read, wall_seconds: float) -> RunFigures | None:
    """One run's figures from its log (rank 0's, or the first rank that logs); None where the log has none."""
    marks = found.marks
    starts, stops = _of(marks, Milestone.RUN_START), _of(marks, Milestone.RUN_STOP)
    logged = _of(marks, Milestone.TIME_TO_TRAIN)
    if not (logged or starts or stops):
        return None
    start = starts[0].time if starts and starts[0].time is not None else None
    if logged:
        seconds, status = logged[-1].value, logged[-1].status or SUCCESS
    elif stops and start is not None and stops[-1].time is not None:
        seconds, status = round(stops[-1].time - start, 3), stops[-1].status
    else:
        seconds, status = None, None
    reached = seconds is not None and (status or "").lower() == SUCCESS
    if reached:
        stopped = SUCCESS
    elif stops and status:
        stopped = f"run_stop with status {status!r}"
    elif stops:
        stopped = "run_stop with no status"
    else:
        stopped = "the log has no run_stop"
    evals = [m for m in _of(marks, Milestone.EVAL) if m.value is not None]
    curve = tuple({"seconds": round(m.time - start, 3), "samples": m.samples or 0, "epoch": m.epoch, METRIC: m.value}
                  for m in evals if m.time is not None and start is not None)
    counted = [r.samples for r in found.records]
    samples = sum(counted) if counted and all(counted) else None
    whole = seconds if seconds is not None else wall_seconds  # no run_stop: the process's own seconds
    epochs = evals[-1].epoch if evals and evals[-1].epoch is not None else None
    return RunFigures(seed=index, metric=METRIC if evals else "run_stop", target=None, reached=reached,
                      stopped=stopped, seconds_to_target=seconds if reached else None,
                      epochs_to_target=epochs if reached else None, samples_to_target=samples if reached else None,
                      final=evals[-1].value if evals else None, seconds=whole, samples=samples, epochs=epochs,
                      throughput=samples / whole if samples and whole else None, curve=curve)


def _figures(run: Run, wall_seconds: float) -> tuple[RunFigures | None, list[dict[str, Any]], list[str]]:
    """The run's figures (its first logging rank's), each of its logged blocks as a window, and its notes."""
    reads = run.read()
    for rank in sorted(reads):
        figures = run_figures(run.index, reads[rank], wall_seconds)
        if figures is not None:
            blocks = [r for r in reads[rank].records if r.samples and r.step_time]
            windows = [{"steps": 1, "samples": r.samples, "seconds": r.step_time,
                        "throughput": r.samples / r.step_time} for r in blocks]
            return figures, windows, run.batch_note(reads)
    return None, [], []


def measure_times(case: Case, spec: CommandSpec, params: RunParams, workdir: Path, launcher: Launcher,
                  on_progress=None) -> tuple[list[RunRecord], list[RunFigures]]:
    """``params.runs`` fresh runs of the command (``{seed}`` 0, 1, ...), each run's record and figures; the first
    run that does not reach its target is the last one.  :class:`CaseError` for a run that crashed, hung or
    logged nothing a time to train is read from."""
    runs: list[RunRecord] = []
    figures: list[RunFigures] = []
    for index in range(params.runs):
        run_dir = workdir / f"run{index}"
        run_dir.mkdir(parents=True, exist_ok=True)
        run = Run(spec, case, params, run_dir, launcher, index)
        shown = None if on_progress is None else functools.partial(on_progress, index, params.runs)
        outcome, follower = execute(run, shown)
        if outcome.returncode != 0 or outcome.timed_out:
            runs.append(run_record(index, run, outcome, [], [], "time_to_train", []))
            kind, message = failure(run, outcome, follower)
            raise CaseError(message, kind, runs)
        found, windows, notes = _figures(run, outcome.wall_seconds)
        runs.append(run_record(index, run, outcome, windows, [], "time_to_train", notes))
        if found is None:
            logs = [p for r in range(case.gpus) for p in run.logs(r) if p.exists()]
            raise CaseError(f"{case.id}: the {spec.parser} parser found no time to train in the command's log: it "
                            f"looked for {run.parser.describe_time_to_train()}{log_tail(logs)}", FailureKind.ERROR,
                            runs)
        runs[-1].convergence = dataclasses.asdict(found)
        figures.append(found)
        if not found.reached:
            break
    return runs, figures


def judged_by_time(case: Case, spec: models.ModelSpec) -> bool:
    """Whether ``case`` is a time-to-train command case."""
    return isinstance(spec, CommandSpec) and spec.times_training
