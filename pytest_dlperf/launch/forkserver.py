"""A run's worker started by a fork server (:mod:`pytest_dlperf.worker.forkserver`), not by a fresh interpreter.

A fresh ``python -m pytest_dlperf.worker`` spends seconds importing torch, torchvision and ``torch._dynamo``
before its first step.  A fork server has imported them once; each run's worker is forked from it, a
process of its own in every way the method needs (the server module says how), and starts in a fraction
of a second.  What a run can fork is its :class:`~pytest_dlperf.launch.launchers.LaunchPlan`'s ``fork``:
our worker where it is the run's one rank, and the ``local`` launcher's torchrun job of our worker's CPU
ranks (the server forks the agent, which forks the ranks: ``--start-method fork``).  A command case, the
ranks srun, mpirun and the ``torchrun`` launcher start, and GPU ranks are started as they always were.  So
is every run with ``dlperf_start=fresh``.

The controller keeps one server per start-time environment (:func:`server_for`): what a process reads only
when it starts (glibc's tunables, ``OMP_NUM_THREADS``, ``PYTHONPATH``, ...) is the server's, so runs whose
environments differ in anything but :data:`LATE_VARIABLES` get servers of their own, at most
:data:`MAX_SERVERS` at a time.  A server lives as long as this process (it ends when its stdin closes,
however this process ends); one that died is replaced at the next run.  A server that dies while its worker
runs fails the run with one line (:attr:`ForkedProcess.lost`); its worker, re-parented, kills its own
process group, and the controller kills what is left of the run.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ..protocol import FORK_SERVER, RUN_ID_PLACEHOLDER, ForkRequest

#: Variables a worker reads when it needs them, never while it starts: a run gets its own value of them
#: (``os.environ``), and runs whose environments differ only in them share a server.  pytest sets the
#: last three per test (pytester's ``HOME``).
LATE_VARIABLES = frozenset({"DLPERF_RUN_ID", "PWD", "OLDPWD", "HOME", "USERPROFILE", "PYTEST_CURRENT_TEST",
                            "PYTEST_DEBUG_TEMPROOT"})
RUN_ID_VARIABLE = "DLPERF_RUN_ID"
MAX_SERVERS = 2
#: Seconds a server may take to import what it preloads (a cold disk, a busy machine).
READY_SECONDS = 300.0
LOG_LINES = 20


#: ``dlperf_start``: ``auto`` forks the runs of cases on the CPU and starts those on GPUs fresh (:func:`uses_server`).
STARTS = ("auto", "forked", "fresh")


def uses_server(start: str, device: str) -> bool:
    """Whether runs on ``device`` ("cpu", "cuda") ask the fork server for their worker under ``dlperf_start``
    ``start``.  ``auto``: on the CPU only.  On a GPU whose step waits on the host a forked worker measured 11% above
    a fresh one (H200, resnet50 amp bs64); a fresh interpreter is how NVIDIA's scripts and a user's training start,
    so it is the reference there, and the server's saving (about 3 s of a GPU run's 7 s setup) is not worth a
    figure that depends on it.  On the CPU the two agree (tiny bs32: 1.006) and the saving is half a run."""
    return start == "forked" or (start == "auto" and device == "cpu")


class ServerError(Exception):
    """A fork server that did not start, or stopped answering."""


class ForkServer:
    """One server process of the interpreter ``python`` (None: this one), started with ``env`` (a run's
    environment), and the replies it has sent."""

    def __init__(self, env: dict[str, str], python: str | None = None):
        self.log = Path(tempfile.mkstemp(prefix="dlperf-forkserver-", suffix=".log")[1])
        started = time.monotonic()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([python or sys.executable, "-m", FORK_SERVER, str(self.log)],
                                         stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                                         env={**env, RUN_ID_VARIABLE: RUN_ID_PLACEHOLDER})
        self.replies: collections.deque[dict] = collections.deque()
        self.ended: dict[int, int] = {}
        self.gone: str | None = None  # why the server stopped answering
        self._pending = b""
        self._lock = threading.Lock()
        try:
            ready = self.reply("ready", READY_SECONDS)
        except BaseException:
            self.close()
            raise
        self.pid = int(ready["ready"])
        self.start_seconds = time.monotonic() - started

    def pump(self, timeout: float | None) -> None:
        """Read what the server has sent within ``timeout`` seconds (None: until something comes)."""
        if self.gone is not None:
            return
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            code = self.proc.wait()
            self.gone = f"the fork server (pid {self.proc.pid}) ended with {describe(code)}"
            return
        self._pending += chunk
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            message = json.loads(line)
            if "ended" in message:
                self.ended[int(message["ended"])] = int(message["returncode"])
            else:
                self.replies.append(message)

    def reply(self, key: str, timeout: float) -> dict:
        """The server's next reply that is not a worker's end (``ready``, ``started`` or ``failed``)."""
        deadline = time.monotonic() + timeout
        while not self.replies:
            if self.gone is not None:
                raise ServerError(f"{self.gone}{self.log_tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerError(f"the fork server (pid {self.proc.pid}) sent no {key!r} in {timeout:.0f} s")
            self.pump(left)
        return self.replies.popleft()

    def start(self, request: ForkRequest) -> ForkedProcess:
        """Fork a worker for ``request``; raises :class:`ServerError` when the server cannot."""
        with self._lock:
            try:
                self.proc.stdin.write(request.to_line())
                self.proc.stdin.flush()
            except OSError as exc:  # a broken pipe: the server died since the last run
                self.pump(0)
                raise ServerError(self.gone or f"the fork server (pid {self.proc.pid}) took no request: {exc}") \
                    from None
            answer = self.reply("started", 60.0)
        if "started" not in answer:
            raise ServerError(f"the fork server could not start a worker: {answer.get('failed', answer)}")
        return ForkedProcess(self, int(answer["started"]))

    @property
    def alive(self) -> bool:
        if self.gone is None and self.proc.poll() is not None:
            self.pump(0)
        return self.gone is None and self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_LINES:]
        except OSError:
            return ""
        return ("\n--- last lines of the fork server's stderr ---\n" + "\n".join(lines)) if lines else ""

    def close(self) -> None:
        """End the server (closing its stdin is its signal: it ends its workers' groups and exits)."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.unlink(missing_ok=True)


class ForkedProcess:
    """A worker the fork server forked, as much of ``subprocess.Popen`` as a run's watch uses: ``pid``,
    ``returncode`` (set once the server reports it), :meth:`poll` and :meth:`wait`.  ``lost`` says why there
    is no exit status: the server died before it reported one."""

    def __init__(self, server: ForkServer, pid: int):
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self.lost: str | None = None

    def _settle(self) -> bool:
        """Whether the worker's end is known: its exit status, or the server gone and the worker with it."""
        if self.returncode is not None or self.lost is not None:
            return True
        if self.pid in self.server.ended:
            self.returncode = self.server.ended.pop(self.pid)
            return True
        if self.server.gone is not None and not _running(self.pid):
            self.lost = f"{self.server.gone} while this run's worker (pid {self.pid}) ran"
            return True
        return False

    def poll(self) -> int | None:
        if not self._settle():
            self.server.pump(0)
            self._settle()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._settle():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired([FORK_SERVER], timeout)
            if self.server.gone is not None:
                time.sleep(0.05)  # the server is gone: wait for its orphan to be
            else:
                self.server.pump(1.0 if left is None else min(left, 1.0))
        return self.returncode


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def describe(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


_servers: collections.OrderedDict[tuple, ForkServer] = collections.OrderedDict()
_failed: dict[tuple, str] = {}
_owner = os.getpid()
_servers_lock = threading.Lock()


def start_key(env: dict[str, str], python: str | None = None) -> tuple:
    """What of ``env`` a process takes when it starts: all but :data:`LATE_VARIABLES`; and its interpreter."""
    return (python or sys.executable, *sorted((k, v) for k, v in env.items() if k not in LATE_VARIABLES))


def server_for(env: dict[str, str], python: str | None = None) -> ForkServer:
    """The server for runs with the environment ``env``: a live one started with the same start-time
    variables, else a new one (the least recently used beyond :data:`MAX_SERVERS` closed).  A server
    that could not start is not tried again for that environment (:class:`ServerError`, saying why).  ``python``:
    the server's interpreter (None: this one): an A/B session's two sides have a server each."""
    global _owner
    key = start_key(env, python)
    with _servers_lock:
        if os.getpid() != _owner:  # a fork of this process: the servers are its parent's
            _servers.clear()
            _owner = os.getpid()
        if key in _failed:
            raise ServerError(_failed[key])
        server = _servers.get(key)
        if server is not None and server.alive:
            _servers.move_to_end(key)
            return server
        if server is not None:
            _servers.pop(key).close()
        try:
            server = ForkServer(env, python)
        except ServerError as exc:
            _failed[key] = str(exc)
            raise
        _servers[key] = server
        while len(_servers) > MAX_SERVERS:
            _servers.popitem(last=False)[1].close()
        return server


def start(module_args: Sequence[str], env: dict[str, str], cwd: str, stdout: Path,
          stderr: Path, python: str | None = None) -> ForkedProcess | None:
    """``python -m MODULE ARGS`` (``module_args``) forked by the server of ``python`` (None: this interpreter) for
    ``env``, or None where no server can start it (the reason is written to ``stderr``, and the caller starts the
    run as a process of its own)."""
    # The logs as this process names them (a Popen would open them here); the arguments as the worker reads
    # them, in cwd.
    module, *args = module_args
    request = ForkRequest(module, args, env, cwd, os.path.abspath(stdout), os.path.abspath(stderr))
    for attempt in range(2):  # a server found dead at the request is replaced once
        try:
            return server_for(env, python).start(request)
        except ServerError as exc:
            why = str(exc)
            if attempt or start_key(env, python) in _failed:
                break
    with open(stderr, "a", encoding="utf-8") as log:
        log.write(f"dlperf: no fork server ({why}); the worker was started as a process of its own\n")
    return None


def servers() -> list[ForkServer]:
    """The servers this process keeps now, the least recently used first (their ``pid`` and ``start_seconds``)."""
    with _servers_lock:
        return list(_servers.values())


def close_all() -> None:
    """End every server this process started (at exit; a server also ends on its own when this process does)."""
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()


atexit.register(close_all)
