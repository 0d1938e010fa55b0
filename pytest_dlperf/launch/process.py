"""Launching workers: a fresh process per run, in its own process group, with a time limit.

Each run of a case is one ``python -m pytest_dlperf.worker SPEC`` process (or, for several
ranks, one ``torchrun`` agent and its ranks) started in a new session, with a
``DLPERF_RUN_ID`` in its environment that every descendant inherits.  A timeout, a failure
or an interrupted pytest ends the run's process group *and* every process carrying its run
id: torchrun starts each rank in a session of its own, out of reach of a ``killpg``.  Each
worker also watches its parent and the controller: if either goes away without cleaning
up, the worker kills its own group.

Time limit: with ``timeout`` set, a run that lasts longer is killed.  Without it the limit
adapts: ``startup_timeout`` covers process start, model build and the first step; each
progress report of the worker (its measured seconds per step and the steps it has left)
moves the deadline to ``now + 3 x step time x steps left + 60 s``.  An external command
(a command case) reports no progress: its log is followed instead (``follow``,
:mod:`pytest_dlperf.commands.follow`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import jsonio
from . import forkserver
from .interrupts import NotedInterrupts
from .waiting import ExitWaiter, deadline_from, read_progress
from ..protocol import PROGRESS_FILE, RESULT_PREFIX, SPEC_FILE, Progress, WorkerResult, WorkerSpec, result_rank

STDERR_TAIL_LINES = 30
KILL_GRACE_SECONDS = 5.0
# How often the controller looks at the progress file and the clock while a run goes on.
# The wait itself returns as soon as the worker exits (a pidfd where Linux has them).
POLL_SECONDS = 1.0

RUN_ID_VARIABLE = "DLPERF_RUN_ID"

_live_runs: dict[int, str] = {}
_live_lock = threading.Lock()


@dataclasses.dataclass
class WorkerOutcome:
    """What a finished (or killed) worker left behind."""

    returncode: int | None
    result: WorkerResult | None  # rank 0's
    timed_out: bool
    time_limit: float | None
    run_dir: Path
    wall_seconds: float
    result_error: str | None = None
    rank_results: dict[int, WorkerResult] = dataclasses.field(default_factory=dict)
    lost: str | None = None  # a forked worker's server died before it said how the worker ended
    start: str = "fresh"  # how its process started: "forked" by the fork server, or "fresh"
    cut: Any = None  # why the controller cut it short (a pytest_dlperf.gate.far.Cut), or None

    @property
    def stderr_path(self) -> Path:
        return self.run_dir / "stderr.log"

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return tail(self.stderr_path, lines)


def tail(path: Path | None, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ("" when it is missing)."""
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return ""


def describe_returncode(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def kill_run(pgid: int, run_id: str | None = None, grace: float = KILL_GRACE_SECONDS,
             first: int = signal.SIGTERM) -> None:
    """``first`` (SIGTERM; SIGINT to stop a command once measured) to the process group and the run's tagged
    processes; SIGKILL what is left after ``grace``."""
    _signal_run(pgid, run_id, first)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not run_alive(pgid, run_id):
            return
        time.sleep(0.05)
    _signal_run(pgid, run_id, signal.SIGKILL)


def _signal_run(pgid: int, run_id: str | None, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    for pid in tagged_processes(run_id):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def run_alive(pgid: int, run_id: str | None = None) -> bool:
    """Whether any process of the group, or tagged with ``run_id``, is still running."""
    members = group_members(pgid) + tagged_processes(run_id)
    return any(_state(pid) not in ("Z", None) for pid in members)


def tagged_processes(run_id: str | None) -> list[int]:
    """Processes of this machine whose environment carries ``DLPERF_RUN_ID=run_id``."""
    if not run_id:
        return []
    needle = f"{RUN_ID_VARIABLE}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if needle in handle.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    members.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return members


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def kill_all_live() -> None:
    """Kill every worker group still running (interrupt, SIGTERM, exit)."""
    with _live_lock:
        runs = list(_live_runs.items())
    for pgid, run_id in runs:
        kill_run(pgid, run_id, grace=1.0)


def run_worker(spec: WorkerSpec | dict[str, Any], run_dir: Path, *, timeout: float | None,
               startup_timeout: float = 300.0, command: list[str] | None = None,
               extra_env: dict[str, str] | None = None,
               on_progress: Callable[[Progress | None, float], None] | None = None,
               fork: Sequence[str] | None = None, python: str | None = None,
               cwd: str | None = None, cut: Callable[[Progress | None, int, str], Any] | None = None) -> WorkerOutcome:
    """Run one worker process for ``spec`` in ``run_dir`` and wait for it.

    ``spec`` is placed in ``run_dir`` (:meth:`WorkerSpec.placed`; a plain dict, as a test
    passes, gets the same three keys) and written to ``spec.json``.  ``run_dir`` also
    receives ``stdout.log``, ``stderr.log``, ``progress.json`` and the worker's
    ``result-rank*.json`` (:mod:`pytest_dlperf.protocol`).  ``command`` replaces the default
    ``python -m pytest_dlperf.worker`` (a distributed launcher passes its own);
    ``extra_env`` is added to this process's environment for it.  ``on_progress(progress,
    elapsed)`` is called about once a second while the worker runs, with its last progress
    report (None before the first) and the seconds since it started.  ``fork``: the module and its arguments
    (a :class:`~pytest_dlperf.launch.launchers.LaunchPlan`'s) that a fork server runs with the spec path where
    one can start it (:mod:`pytest_dlperf.launch.forkserver`), instead of the command; ``python``: that server's
    interpreter (None: this one); ``cwd``: the run's working directory (None: this one).  ``cut(progress, pid,
    run_id)``: asked with each report, what it returns once not None (:class:`pytest_dlperf.launch.pace.PaceWatch`)
    ends the run and is kept in the outcome's ``cut``.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    progress_path = run_dir / PROGRESS_FILE
    if isinstance(spec, WorkerSpec):
        document = spec.placed(str(run_dir), str(progress_path)).to_dict()
    else:
        document = dict(spec, result_dir=str(run_dir), progress_path=str(progress_path), launched_at=time.time())
    spec_path = run_dir / SPEC_FILE
    jsonio.write_atomic(spec_path, json.dumps(document, indent=2))
    cmd = (command or [sys.executable, "-m", "pytest_dlperf.worker"]) + [str(spec_path)]
    ended = run_command(cmd, run_dir, timeout=timeout, startup_timeout=startup_timeout, extra_env=extra_env,
                        progress_path=progress_path, on_progress=on_progress, cwd=cwd,
                        forked=[*fork, str(spec_path)] if fork else None, python=python, cut=cut)
    results, errors = _read_results(run_dir)
    return WorkerOutcome(ended.returncode, results.get(0), ended.timed_out, ended.time_limit, run_dir,
                         ended.wall_seconds, errors.get(0), results, ended.lost, ended.start, ended.cut)


@dataclasses.dataclass
class CommandOutcome:
    """How a command run by :func:`run_command` ended: its output is in ``run_dir``'s ``stdout.log`` and ``stderr.log``."""

    returncode: int | None
    timed_out: bool
    time_limit: float
    run_dir: Path
    wall_seconds: float
    lost: str | None = None  # a forked worker's server died before it said how the worker ended
    #: Ended by the controller once its log had the steps the case needs (``done``): its exit status is the stop's.
    stopped: bool = False
    start: str = "fresh"  # "forked": the fork server started it; "fresh": a process of its own
    cut: Any = None  # what ``cut`` returned when the run was cut short, or None

    @property
    def ok(self) -> bool:
        """It ended by itself with status 0, or was stopped once measured; not timed out."""
        return (self.returncode == 0 or self.stopped) and not self.timed_out


def run_command(cmd: list[str], run_dir: Path, *, timeout: float | None, startup_timeout: float = 300.0,
                extra_env: dict[str, str] | None = None, cwd: str | None = None,
                progress_path: Path | None = None,
                on_progress: Callable[[Progress | None, float], None] | None = None,
                follow: Callable[[], tuple[float, Progress | None]] | None = None,
                forked: Sequence[str] | None = None, done: Callable[[], bool] | None = None,
                python: str | None = None, cut: Callable[[Progress | None, int, str], Any] | None = None
                ) -> CommandOutcome:
    """Run ``cmd`` in a new session and process group, tagged with a run id, and wait for it.

    Its stdout and stderr go to ``run_dir/stdout.log`` and ``stderr.log``; ``cwd`` is its working directory (default:
    this one).  The time limit is ``timeout``; without it ``startup_timeout``, moved on by each report in
    ``progress_path`` (a worker's :class:`Progress`), or where the run writes no progress file, by ``follow()``:
    called once a second, it returns the run's deadline (on ``time.monotonic``'s clock) and its progress, from what
    its log showed so far.  Nothing of the run outlives this call: at the limit, on an exception in the controller,
    or when processes of the run remain after it exited.  ``forked``: the module and arguments that do what ``cmd``
    does, which a fork server runs where it can (:func:`pytest_dlperf.launch.forkserver.start`; else ``cmd`` runs,
    as without it), a server of the interpreter ``python`` (None: this one).
    ``done()``: asked after each ``follow()``; once it is true (a command that logged the steps its case needs
    and would go on training), the run is stopped: SIGINT to its process group and tagged processes, SIGKILL
    after the grace, and the outcome says ``stopped``.  ``cut(progress, pid, run_id)``: asked with the run's last
    progress once a second; once it returns something, the run is killed and the outcome keeps it (``cut``).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    child_env = _child_env(extra_env)
    run_id = child_env[RUN_ID_VARIABLE]

    logs = run_dir / "stdout.log", run_dir / "stderr.log"
    for log in logs:
        log.write_bytes(b"")
    # A fork server that starts here first (its imports, once) does so outside the run's time limit.
    proc = forkserver.start(forked, child_env, cwd or os.getcwd(), *logs, python=python) if forked \
        else None
    start = time.monotonic()
    deadline = start + (timeout if timeout is not None else startup_timeout)
    with open(logs[0], "ab") as out, open(logs[1], "ab") as err:
        if proc is None:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=child_env, cwd=cwd or os.getcwd())
        with _live_lock:
            _live_runs[proc.pid] = run_id
        try:
            with NotedInterrupts() as interrupted:
                timed_out, deadline, stopped, why = _watch(proc, run_id, start, deadline, timeout is not None,
                                                           progress_path, on_progress, follow, interrupted, done, cut)
        finally:
            # Normal exit, timeout, or an exception (KeyboardInterrupt) in the controller:
            # nothing of the run outlives this call.
            if proc.poll() is None:
                kill_run(proc.pid, run_id)
                proc.wait()
            elif run_alive(proc.pid, run_id):
                kill_run(proc.pid, run_id, grace=1.0)
            with _live_lock:
                _live_runs.pop(proc.pid, None)
    limit = timeout if timeout is not None else max(deadline - start, 0.0)
    return CommandOutcome(proc.returncode, timed_out, limit, run_dir, time.monotonic() - start,
                          getattr(proc, "lost", None), stopped,
                          "forked" if isinstance(proc, forkserver.ForkedProcess) else "fresh", why)


def _child_env(extra_env: dict[str, str] | None) -> dict[str, str]:
    """A run's environment: this one, ``extra_env``, unbuffered output, its controller and a new run id."""
    env = {**os.environ, **(extra_env or {})}
    env.update({"PYTHONUNBUFFERED": "1", "DLPERF_PARENT_PID": str(os.getpid()),
                "DLPERF_PARENT_HOST": socket.gethostname(), RUN_ID_VARIABLE: uuid.uuid4().hex})
    return env


def _watch(proc: subprocess.Popen | forkserver.ForkedProcess, run_id: str, start: float, deadline: float,
           fixed: bool, progress_path: Path | None, on_progress: Callable[[Progress | None, float], None] | None,
           follow: Callable[[], tuple[float, Progress | None]] | None,
           interrupted: Callable[[], KeyboardInterrupt | None] = lambda: None,
           done: Callable[[], bool] | None = None,
           cut: Callable[[Progress | None, int, str], Any] | None = None) -> tuple[bool, float, bool, Any]:
    """Wait for ``proc``, looking at its progress once a second; kill its run at the deadline (moved by each
    report unless the limit is ``fixed``), stop it (SIGINT first) once ``done()``, kill it once ``cut`` returns
    something.  Returns whether it timed out, the deadline it ended with, whether it was stopped, and what ``cut``
    returned (None: not cut).
    ``interrupted()``: a KeyboardInterrupt raised meanwhile, raised again here (where it was lost)."""
    seen = 0.0
    with ExitWaiter(proc) as exited:
        last = None
        while not exited(POLL_SECONDS):
            if (lost := interrupted()) is not None:
                raise lost
            fresh = None
            if progress_path is not None:
                fresh, seen = read_progress(progress_path, seen)
            last = fresh or last
            if not fixed and fresh is not None:
                deadline = deadline_from(fresh, deadline)
            if follow is not None:
                followed, fresh = follow()
                last = fresh or last
                deadline = followed if not fixed else deadline
            if done is not None and done():
                if on_progress is not None:
                    on_progress(last, time.monotonic() - start)
                kill_run(proc.pid, run_id, first=signal.SIGINT)
                proc.wait()
                return False, deadline, True, None
            if on_progress is not None:
                on_progress(last, time.monotonic() - start)
            if cut is not None and (why := cut(last, proc.pid, run_id)) is not None:
                kill_run(proc.pid, run_id)
                proc.wait()
                return False, deadline, False, why
            if time.monotonic() > deadline:
                kill_run(proc.pid, run_id)
                proc.wait()
                return True, deadline, False, None
        if progress_path is not None and on_progress is not None:
            # The run's last progress (its windows done), which a run shorter than a poll leaves unread.
            fresh, seen = read_progress(progress_path, seen)
            if fresh is not None:
                on_progress(fresh, time.monotonic() - start)
    return False, deadline, False, None


def _read_results(run_dir: Path) -> tuple[dict[int, WorkerResult], dict[int, str]]:
    """Each rank's result (schema-checked, typed), and why a rank's could not be read."""
    results: dict[int, WorkerResult] = {}
    errors: dict[int, str] = {}
    for path in sorted(run_dir.glob(f"{RESULT_PREFIX}*.json")):
        rank = result_rank(path.name)
        if rank is None:
            continue
        try:
            results[rank] = WorkerResult.from_dict(jsonio.load(path, "result", "worker result"))
        except (jsonio.DocumentError, TypeError) as exc:
            errors[rank] = str(exc)
    return results, errors

