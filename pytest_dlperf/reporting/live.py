"""Live progress while a case runs: its phase, its windows and the time it has left.

A case can take minutes; pytest shows nothing of a test until it ends.  :class:`LiveProgress`
is told about once a second where the case's worker is (:class:`~pytest_dlperf.protocol.Progress`)
and shows it:

* on a terminal, after pytest's own line (``dlperf ..``), rewritten in place and erased
  before pytest writes the case's result letter::

      dlperf ..tiny-fp32-bs32-gpu1: run 1/3, window 2/5 (last 3412.7 img/s), about 12 s left

* elsewhere (a CI log), one plain line each time the phase or the window changes;
* nothing under ``-q``.

pytest captures a test's output; the lines are written with capture suspended, as pytest's
own live logging does.
"""

from __future__ import annotations

import shutil
import sys
import time
import warnings
from typing import Any

from ..gate.format import fmt_value
from ..protocol import Progress

SAVE_CURSOR, RESTORE_AND_CLEAR = "\x1b7", "\x1b8\x1b[K"


def describe(label: str, run: int, runs: int, progress: Progress | None, elapsed: float, unit: str,
             attempt: int = 0, setup_seconds: float | None = None) -> tuple[str, str]:
    """(the status line, its key): the key changes with the phase and the window, not with the seconds."""
    head = f"{label}: " + ("re-measuring, " if attempt else "") + (f"run {run + 1}/{runs}, " if runs > 1 else "")
    if progress is None or progress.phase is None:
        return f"{head}starting ({elapsed:.0f} s)", f"{attempt}/{run}/starting"
    if progress.phase == "compiling":
        return f"{head}compiling ({elapsed:.0f} s)", f"{attempt}/{run}/compiling"
    if progress.phase == "warm-up":
        where = f"warm-up {progress.warmup_done or 0}/{progress.warmup_total or '?'}"
        key = f"{attempt}/{run}/warm-up"
    elif progress.windows_total and (progress.windows_done or 0) >= progress.windows_total:
        where = "windows done"
        key = f"{attempt}/{run}/done"
    else:
        where = f"window {(progress.windows_done or 0) + 1}/{progress.windows_total or '?'}"
        key = f"{attempt}/{run}/window{progress.windows_done}"
    if progress.phase == "measuring" and progress.last_throughput is not None:
        where += f" (last {fmt_value(progress.last_throughput)} {unit})"
    left = time_left(progress, run, runs, elapsed, setup_seconds)
    return f"{head}{where}" + (f", {left} left" if left else ""), key


def time_left(progress: Progress, run: int, runs: int, elapsed: float, setup_seconds: float | None) -> str | None:
    """About how long the case has left: this run's steps at its step time, and the runs after it."""
    if progress.step_seconds is None or progress.remaining_steps is None:
        return None
    since = max(0.0, time.time() - progress.time) if progress.time else 0.0
    this_run = max(0.0, progress.step_seconds * progress.remaining_steps - since)
    total_steps = (progress.warmup_total or 0) + progress.remaining_steps  # a lower bound for a fresh run
    per_run = (setup_seconds or elapsed) + progress.step_seconds * total_steps
    seconds = this_run + (runs - run - 1) * per_run
    if seconds < 1:
        return None
    minutes, secs = divmod(round(seconds), 60)
    return f"about {minutes} min {secs} s" if minutes else f"about {secs} s"


class LiveProgress:
    """The progress of the case that is running, on pytest's terminal (see the module's docstring)."""

    def __init__(self, config: Any):
        self.config = config
        self.terminal = self.capture = None
        self.enabled = self.tty = False
        self._shown = False
        self._key: str | None = None
        self._setup: float | None = None

    def start(self) -> None:
        """Before a case's measurement (the terminal exists by then: not yet when the session is made)."""
        self.terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        self.capture = self.config.pluginmanager.get_plugin("capturemanager")
        self.enabled = self.terminal is not None and self.config.get_verbosity() >= 0
        self.tty = bool(self.enabled and self.terminal.isatty())
        self._shown, self._key, self._setup = False, None, None

    def update(self, label: str, unit: str, attempt: int, run: int, runs: int, progress: Progress | None,
               elapsed: float) -> None:
        if not self.enabled:
            return
        try:
            self._update(label, unit, attempt, run, runs, progress, elapsed)
        except Exception as exc:  # noqa: BLE001 - a display never fails a case: it goes quiet instead
            self.enabled = False
            warnings.warn(f"dlperf: live progress turned off: {type(exc).__name__}: {exc}", stacklevel=1)

    def _update(self, label: str, unit: str, attempt: int, run: int, runs: int, progress: Progress | None,
                elapsed: float) -> None:
        if progress is not None and progress.phase is not None and self._setup is None:
            self._setup = elapsed  # the first run's start-up: process, imports, model, first step
        line, key = describe(label, run, runs, progress, elapsed, unit, attempt, self._setup)
        if self.tty:
            self._write_in_place(line)
        elif key != self._key:
            self._write_plain(line)
        self._key = key

    def finish(self) -> None:
        """Erase the status (on a terminal), or start pytest's line again (after plain lines), so that
        pytest's result letter lands where it belongs."""
        if self.enabled and self.tty and self._shown:
            self._out(RESTORE_AND_CLEAR)
        elif self.enabled and not self.tty and self._key is not None:
            if self.config.get_verbosity() > 0:
                self.terminal.currentfspath = None  # pytest writes the case's own prefix again
            else:
                self._with_capture_suspended(lambda: self.terminal.write("dlperf "))
                self.terminal.currentfspath = self.config.rootpath / "dlperf"
        self._shown, self._key = False, None

    def _write_in_place(self, line: str) -> None:
        width = shutil.get_terminal_size().columns
        # The status goes after what pytest wrote on this line; it must not wrap, or it could not be erased.
        used = self.terminal._tw.width_of_current_line  # pytest's TerminalWriter has no public accessor
        room = width - used - 1
        if room < 20:
            return
        text = line if len(line) <= room else line[:room - 3] + "..."
        self._out((RESTORE_AND_CLEAR if self._shown else SAVE_CURSOR) + text)
        self._shown = True

    def _write_plain(self, line: str) -> None:
        self._with_capture_suspended(lambda: (self.terminal.ensure_newline(),
                                              self.terminal.write_line(f"dlperf: {line}")))
        self.terminal.currentfspath = None  # at the start of a line: no newline before the next one

    def _out(self, text: str) -> None:
        """Cursor movements and the status, straight to the terminal: pytest's writer would count
        them as text on its line, and align its [ 50%] column by them."""
        def write() -> None:
            self.terminal.flush()
            sys.stdout.write(text)
            sys.stdout.flush()

        self._with_capture_suspended(write)

    def _with_capture_suspended(self, write) -> None:
        if self.capture is not None:
            with self.capture.global_and_fixture_disabled():
                write()
        else:
            write()
