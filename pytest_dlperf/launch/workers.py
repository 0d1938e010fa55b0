"""A case's runs as fresh worker processes: :class:`RunParams` in, one :class:`~pytest_dlperf.results.runs.RunRecord`
per run out, a failed run explained.

The seeds' method is "skip 20 steps, average 100, run 5-7 times, take the median": here
each run is a fresh process (warm-up, then ``repeats`` windows of ``steps`` steps), a run's
figure is the median of its windows, and the case's figure the geometric mean of its runs'
(:mod:`pytest_dlperf.gate.evidence`); the windows of all runs are pooled only for their statistics.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from pathlib import Path
from typing import Any

from ..cases import Case
from ..models import ModelSpec
from ..protocol import ConvergenceSpec, WorkerResult, WorkerSpec, ValueEnum, WorkerStatus
from ..results.runs import RankRecord, RunRecord, RunStatus
from ..gate.far import FarRule
from . import process, threads
from .pace import PaceWatch
from .launchers import Launcher, LocalLauncher, malloc_env


@dataclasses.dataclass(frozen=True)
class RunParams:
    """How each run of a case is made.  The fields the worker needs reach it under the same
    names in its spec (:meth:`pytest_dlperf.protocol.WorkerSpec.from_params`)."""

    device: str  # "cuda" or "cpu", resolved
    warmup_steps: int = 20
    steps: int = 100
    repeats: int = 5
    runs: int = 1
    timeout: float | None = None
    startup_timeout: float = 300.0
    launcher: str = "local"
    peak_tflops: float | None = None  # dlperf_peak_tflops: one device's peak, for MFU
    telemetry: bool = True  # dlperf_no_telemetry turns the workers' sampler off
    data_dir: str | None = None  # --dlperf-data-dir: the ImageFolder of data=torchvision / dali cases
    data_workers: int | None = None  # dlperf_data_workers: per rank; None: from the CPUs per rank
    data_only: bool = False  # --dlperf-data-only: time the data loader alone
    max_memory: int | None = None  # --dlperf-max-memory: bytes each worker's training may add
    share_gpus: bool = False  # --dlperf-share-gpus: ranks onto the visible GPUs modulo their count, over gloo
    dist_backend: str = "auto"  # dlperf_dist_backend: the process group's backend
    convergence: ConvergenceSpec | None = None  # a convergence case's target, budget and recipe
    profile: bool = False  # --dlperf-profile's extra run: its steps under torch.profiler, never counted
    malloc: str = "steady"  # dlperf_malloc: the workers' allocator settings (launchers.malloc_env)
    fork_server: bool = True  # dlperf_start=fresh turns it off: every worker a process of its own
    # Intra-op threads of each CPU rank (OMP_NUM_THREADS: launch/threads.py, dlperf_cpu_threads); None: none
    # set, the environment as it is (a GPU case)
    cpu_threads: int | None = None
    #: The pace under which a run is cut short (a case judged against a baseline: pytest_dlperf.gate.far); None: never
    far: FarRule | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["convergence"] is None:
            del out["convergence"]  # a throughput case's parameters read as before
        if out["far"] is None:
            del out["far"]
        if not out["profile"]:
            del out["profile"]
        return out


class FailureKind(ValueEnum):
    """Why a case's runs ended without a measurement (:class:`CaseError`)."""

    LAUNCHER = "launcher"  # the launcher could not start the ranks (its own words explain it)
    TIMEOUT = "timeout"  # killed at its time limit, or a command that hung
    OOM = "oom"  # out of memory: no failure for a batch size search's trial
    ERROR = "error"  # an exception the worker reported, or a log the parser cannot read
    CRASH = "crash"  # ended without a result
    MAX_BATCH = "max-batch"  # a batch size max search found no batch


class CaseError(Exception):
    """A run that produced no measurement: crash, out of memory, timeout (``kind``)."""

    def __init__(self, message: str, kind: FailureKind, runs: list[RunRecord]):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.runs = runs


class RemoteRankZero(Exception):
    """This node ran some ranks of the job; rank 0, which reports the figures, ran elsewhere."""

    def __init__(self, ranks: list[int], runs: list[RunRecord]):
        super().__init__(f"ranks {ranks} ran here")
        self.ranks = ranks
        self.runs = runs


def run_record(index: int, outcome: process.WorkerOutcome) -> RunRecord:
    """One run as the session results keep it: rank 0's result, or how the run ended without one."""
    result = outcome.result
    if outcome.cut is not None:  # cut short, far off its baseline: no result, its pace
        return RunRecord(index, RunStatus.FAR_OFF, outcome.returncode, round(outcome.wall_seconds, 3),
                         str(outcome.run_dir), start=outcome.start, far_off=outcome.cut.to_dict())
    if result is None:
        return RunRecord(index, RunStatus.TIMEOUT if outcome.timed_out else RunStatus.CRASHED, outcome.returncode,
                         round(outcome.wall_seconds, 3), str(outcome.run_dir), start=outcome.start)
    return RunRecord(
        index, RunStatus(result.status.value), outcome.returncode, round(outcome.wall_seconds, 3),
        str(outcome.run_dir), device=result.device, windows=result.windows or [], timing=result.timing or {},
        final_loss=result.final_loss, warnings=result.warnings or [], settings=result.settings,
        memory_cap=result.memory_cap, telemetry=result.telemetry, flops=result.flops, data=result.data,
        convergence=result.convergence, interference=result.interference, profile=result.profile,
        ranks=[RankRecord(r["rank"], r["host"], r["device"].get("name"), r["windows"], r.get("telemetry"),
                          r.get("data")) for r in result.ranks or []], start=outcome.start)


def _tail_block(path) -> str:
    tail = process.tail(path)
    return f"\n--- last lines of the worker's stderr ({path}) ---\n{tail}" if tail else ""


_COMMUNICATION = ("connection reset by peer", "connection closed by peer", "broken pipe", "nccl",
                  "gloo", "socket", "timed out", "barrier")


def first_failed_rank(world: int, results: dict[int, WorkerResult],
                      reported: tuple[int, int | None] | None) -> int | None:
    """The rank that most likely failed first.

    When one rank dies, the others fail in their next collective ("connection reset by
    peer") and may write that as their error before the launcher tears them down.  So:
    a rank that wrote no result (it died), then one whose error is not a communication
    error, then the rank the launcher reports, then any rank with an error.
    """
    silent = [r for r in range(world) if r not in results] if world > 1 else []
    if silent:
        return reported[0] if reported and reported[0] in silent else silent[0]
    errors = sorted(r for r, res in results.items() if not res.ok)
    own = [r for r in errors if not any(w in (results[r].error or {}).get("message", "").lower()
                                        for w in _COMMUNICATION)]
    if own:
        return own[0]
    if reported is not None:
        return reported[0]
    return errors[0] if errors else None


def status_text(code: int | None) -> str:
    """An exit status in one wording (``signal SIGSEGV``, ``exit status 1``), with what a SIGKILL may mean."""
    text = process.describe_returncode(code)
    if code == -signal.SIGKILL:
        text += " (killed: perhaps by the kernel's out-of-memory killer; `dmesg` says)"
    return text


def _timeout_message(case: Case, outcome: process.WorkerOutcome, launcher: Launcher, timeout_given: bool) -> str:
    """A run killed at its time limit: which ranks had not finished, with their own stderr, and what set the limit."""
    limit = ("dlperf_timeout" if timeout_given else
             "the limit set from the worker's step time: 3 x its remaining steps + 60 s; dlperf_timeout sets one")
    text = f"{case.id}: timed out after {outcome.time_limit:.0f} s ({limit}); the worker's process group was killed"
    if case.gpus == 1:
        return text + _tail_block(outcome.stderr_path)
    waiting = [r for r in range(case.gpus) if r not in outcome.rank_results]
    if not waiting:
        return text + _tail_block(outcome.stderr_path)
    text += f"; rank(s) {', '.join(map(str, waiting))} had not finished"
    for rank in waiting[:2]:
        path = launcher.rank_stderr(outcome.run_dir, rank)
        tail = process.tail(path) if path else ""
        if tail:
            text += f"\n--- last lines of rank {rank}'s stderr ({path}) ---\n{tail}"
    return text


def failure_message(case: Case, outcome: process.WorkerOutcome,
                    launcher: Launcher | None = None, timeout_given: bool = True) -> tuple[FailureKind, str]:
    """(kind, message) for a run that produced no measurement.

    For several ranks it names the rank that failed first: one whose result says so, or
    the one the launcher reports (torchrun's root cause, srun's task, mpirun's process),
    with that rank's own stderr.  Exit statuses read alike whoever reports them.
    """
    launcher = launcher or LocalLauncher()
    if outcome.lost is not None:
        return FailureKind.CRASH, (f"{case.id}: {outcome.lost}; the run's processes were killed "
                                   "(dlperf_start=fresh starts each worker as a process of its own)")
    results = outcome.rank_results
    agent_text = process.tail(outcome.stderr_path, 200)
    explained = launcher.explain(agent_text) if not results else None
    if explained and not outcome.timed_out:
        return FailureKind.LAUNCHER, f"{case.id}: {explained}"
    reported = launcher.failed_rank(agent_text)
    failed = first_failed_rank(case.gpus, results, reported)
    who, stderr = "the worker", outcome.stderr_path
    by_rank = case.gpus > 1 and failed is not None
    if by_rank:
        known = reported is not None and reported[0] == failed and reported[1] is not None
        status = f" ({status_text(reported[1])})" if known else ""
        who = f"rank {failed}{status}"
        stderr = launcher.rank_stderr(outcome.run_dir, failed) or stderr
    result = results.get(failed) if failed is not None else outcome.result
    if outcome.timed_out:
        return FailureKind.TIMEOUT, _timeout_message(case, outcome, launcher, timeout_given)
    if result is not None and result.status == WorkerStatus.OOM:
        device = result.device
        where = device.get("name") or device.get("type", "the device")
        if device.get("type") == "cuda" and device.get("index") is not None:
            where = f"cuda:{device['index']} ({where})"
        on_rank = f" (rank {failed})" if by_rank else ""
        return FailureKind.OOM, (f"{case.id}: out of memory at batch size {case.batch_size} on {where}{on_rank}: "
                       f"{result.error['message'].splitlines()[0]}")
    if result is not None and result.status == WorkerStatus.ERROR:
        err = result.error
        return FailureKind.ERROR, f"{case.id}: {who} failed: {err['type']}: {err['message']}{_tail_block(stderr)}"
    why = outcome.result_error or "wrote no result"
    if by_rank:
        return FailureKind.CRASH, f"{case.id}: {who} died; the job ended with {status_text(outcome.returncode)}" \
                        f"{_tail_block(stderr)}"
    return FailureKind.CRASH, (f"{case.id}: the worker ended with {status_text(outcome.returncode)} "
                     f"and {why}{_tail_block(stderr)}")


def measure(case: Case, spec: ModelSpec, params: RunParams, workdir: Path,
            launcher: Launcher | None = None, on_progress=None, first_index: int = 0) -> list[RunRecord]:
    """Run ``params.runs`` fresh workers for ``case``, their records in order; raise :class:`CaseError` if one
    fails.

    A run whose rank 0 is on another node (the ``torchrun`` launcher across nodes) leaves
    no rank-0 result here: :class:`RemoteRankZero` carries what this node's ranks measured.
    ``on_progress(run_index, runs, progress, elapsed)`` is called about once a second while
    a run goes on (:func:`pytest_dlperf.launch.process.run_worker`).  ``first_index``: the index of
    the first run (its folder ``run<index>``), for a case measured one run at a time.
    """
    launcher = launcher or LocalLauncher()
    runs: list[RunRecord] = []
    for index in range(first_index, first_index + params.runs):
        run_dir = workdir / f"run{index}"
        plan = launcher.with_env(launcher.plan(case.gpus, params.device, run_dir),
                                 {**malloc_env(params.malloc), **threads.environment(params.cpu_threads)})
        worker_spec = dataclasses.replace(WorkerSpec.from_params(case, spec, params, distributed=plan.distributed),
                                          run_index=index)
        outcome = process.run_worker(worker_spec, run_dir, timeout=params.timeout,
                                    startup_timeout=params.startup_timeout, command=plan.command,
                                    extra_env=plan.env,
                                    on_progress=None if on_progress is None else
                                    functools.partial(on_progress, index, first_index + params.runs),
                                    fork=plan.fork if params.fork_server else None, python=plan.python,
                                    cwd=plan.cwd, cut=PaceWatch(params.far, params.device) if params.far else None)
        record = run_record(index, outcome)
        runs.append(record)
        if record.far_off is not None:
            continue  # judged as far off (pytest_dlperf.gate.sequential), not a failed run
        local_ok = outcome.rank_results and all(r.ok for r in outcome.rank_results.values())
        if outcome.result is None and local_ok and outcome.returncode == 0:
            raise RemoteRankZero(sorted(outcome.rank_results), runs)
        if outcome.result is None or not record.ok or outcome.returncode != 0:
            kind, message = failure_message(case, outcome, launcher, timeout_given=params.timeout is not None)
            raise CaseError(message, kind, runs)
    return runs
