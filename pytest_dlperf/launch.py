"""Launching workers: a fresh process per run, in its own process group, with a time limit.

Each run of a case is one ``python -m pytest_dlperf.worker SPEC`` process started in a new
session (process group), so that a timeout, a failure or an interrupted pytest kills the
worker and everything it started (DataLoader workers, a hung collective) with one
``killpg``.  The worker also watches its parent: if the controller dies without a chance
to clean up, the worker kills its own group.

Time limit: with ``timeout`` set, a run that lasts longer is killed.  Without it the limit
adapts: ``startup_timeout`` covers process start, model build and the first step; each
progress report of the worker (its measured seconds per step and the steps it has left)
moves the deadline to ``now + 3 x step time x steps left + 60 s``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from . import jsonio

STDERR_TAIL_LINES = 30
KILL_GRACE_SECONDS = 5.0
POLL_SECONDS = 0.1

_live_groups: set[int] = set()
_live_lock = threading.Lock()


@dataclasses.dataclass
class WorkerOutcome:
    """What a finished (or killed) worker left behind."""

    returncode: int | None
    result: dict[str, Any] | None
    timed_out: bool
    time_limit: float | None
    run_dir: Path
    wall_seconds: float
    result_error: str | None = None

    @property
    def stderr_path(self) -> Path:
        return self.run_dir / "stderr.log"

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as handle:
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


def kill_group(pgid: int, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace`` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); look for a member that is not one.
    return any(_state(pid) not in ("Z", None) for pid in _group_members(pgid))


def _group_members(pgid: int) -> list[int]:
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
        groups = list(_live_groups)
    for pgid in groups:
        kill_group(pgid, grace=1.0)


def _deadline_from_progress(path: Path, current: float, last_seen: float) -> tuple[float, float]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return current, last_seen
    if stat.st_mtime_ns == last_seen:
        return current, last_seen
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return current, last_seen
    step_seconds = progress.get("step_seconds")
    remaining = progress.get("remaining_steps")
    if step_seconds is None or remaining is None:
        return current, stat.st_mtime_ns
    return time.monotonic() + 3.0 * float(step_seconds) * int(remaining) + 60.0, stat.st_mtime_ns


def run_worker(spec: dict[str, Any], run_dir: Path, *, timeout: float | None,
               startup_timeout: float = 300.0, command: list[str] | None = None,
               env: dict[str, str] | None = None) -> WorkerOutcome:
    """Run one worker process for ``spec`` in ``run_dir`` and wait for it.

    ``run_dir`` receives ``spec.json``, ``stdout.log``, ``stderr.log``, ``progress.json``
    and the worker's ``result-rank*.json``.  ``command`` replaces the default
    ``python -m pytest_dlperf.worker`` (a distributed launcher passes its own).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    progress_path = run_dir / "progress.json"
    spec = dict(spec, result_dir=str(run_dir), progress_path=str(progress_path), launched_at=time.time())
    spec_path = run_dir / "spec.json"
    jsonio.write_atomic(spec_path, json.dumps(spec, indent=2))
    cmd = (command or [sys.executable, "-m", "pytest_dlperf.worker"]) + [str(spec_path)]
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env["DLPERF_PARENT_PID"] = str(os.getpid())

    start = time.monotonic()
    deadline = start + (timeout if timeout is not None else startup_timeout)
    seen = 0.0
    timed_out = False
    with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=child_env, cwd=os.getcwd())
        with _live_lock:
            _live_groups.add(proc.pid)
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if timeout is None:
                    deadline, seen = _deadline_from_progress(progress_path, deadline, seen)
                if time.monotonic() > deadline:
                    timed_out = True
                    kill_group(proc.pid)
                    proc.wait()
                    break
        finally:
            # Normal exit, timeout, or an exception (KeyboardInterrupt) in the controller:
            # nothing of the group outlives this call.
            if proc.poll() is None:
                kill_group(proc.pid)
                proc.wait()
            elif group_alive(proc.pid):
                kill_group(proc.pid, grace=1.0)
            with _live_lock:
                _live_groups.discard(proc.pid)
    wall = time.monotonic() - start
    result, result_error = _read_result(run_dir)
    limit = timeout if timeout is not None else max(deadline - start, 0.0)
    return WorkerOutcome(proc.returncode, result, timed_out, limit, run_dir, wall, result_error)


def _read_result(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = run_dir / "result-rank0.json"
    if not path.exists():
        return None, None
    try:
        return jsonio.load(path, "result", "worker result"), None
    except jsonio.DocumentError as exc:
        return None, str(exc)


def watch_parent() -> None:
    """In a worker: kill our own process group if the controller that started us goes away."""
    expected = os.environ.get("DLPERF_PARENT_PID")
    if not expected:
        return
    expected_pid = int(expected)

    def loop() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(expected_pid, 0)
            except ProcessLookupError:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            except PermissionError:
                pass

    threading.Thread(target=loop, name="dlperf-parent-watch", daemon=True).start()
