"""How the controller waits on a run: its exit (a pidfd, not a polling wait), its progress file, its deadline."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

from . import forkserver
from ..protocol import Progress


class ExitWaiter:
    """``waiter(seconds)``: block until the process exits or ``seconds`` pass; True once it has exited.

    With a pidfd the controller sleeps in ``select`` and wakes once a second, or at the exit;
    ``Popen.wait(timeout)`` polls every few milliseconds, taking CPU from the training it
    measures on a small machine.
    """

    def __init__(self, proc: subprocess.Popen | forkserver.ForkedProcess):
        self.proc = proc
        try:
            self.pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # not Linux, or a kernel without pidfds
            self.pidfd = None

    def __call__(self, seconds: float) -> bool:
        if self.pidfd is None:
            try:
                self.proc.wait(timeout=seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        ready, _, _ = select.select([self.pidfd], [], [], seconds)
        if ready:
            self.proc.wait()
        return bool(ready)

    def __enter__(self) -> ExitWaiter:
        return self

    def __exit__(self, *exc) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)


def read_progress(path: Path, last_seen: float) -> tuple[Progress | None, float]:
    """The worker's progress report if the file changed since ``last_seen`` (its mtime), else None."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None, last_seen
    if stat.st_mtime_ns == last_seen:
        return None, last_seen
    try:
        return Progress.from_dict(json.loads(path.read_text(encoding="utf-8"))), stat.st_mtime_ns
    except (OSError, ValueError, TypeError):
        return None, last_seen


def deadline_from(progress: Progress | None, current: float) -> float:
    """Without ``dlperf_timeout``: three times the steps the worker has left at its step time, plus a minute."""
    if progress is None or progress.step_seconds is None or progress.remaining_steps is None:
        return current
    return time.monotonic() + 3.0 * float(progress.step_seconds) * int(progress.remaining_steps) + 60.0
