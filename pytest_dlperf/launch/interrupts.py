"""Interrupts a run's watch must not lose (:class:`NotedInterrupts`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


class NotedInterrupts:
    """``with NotedInterrupts() as interrupted``: the KeyboardInterrupt that SIGINT or SIGTERM raised meanwhile
    (``interrupted()``; None if none), which the watch raises again at its next look.

    Python raises it wherever the main thread is when it handles the signal; in a finalizer (a ``__del__``,
    a generator's cleanup that the garbage collector runs) it is printed as "Exception ignored" and lost,
    and a session told to stop (Ctrl-C, or the plugin's SIGTERM) would wait for the run it was told to end.
    Each handler that was there stays the one that decides: a handler that does not raise KeyboardInterrupt
    is not overruled.  Only the main thread can set handlers; elsewhere this notes nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.raised: KeyboardInterrupt | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Callable[[], KeyboardInterrupt | None]:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    self.previous[sig] = signal.signal(sig, self._noting(handler))
        return lambda: self.raised

    def _noting(self, handler: Callable) -> Callable:
        def noting(signum, frame):
            try:
                handler(signum, frame)
            except KeyboardInterrupt as exc:
                self.raised = exc
                raise
        return noting

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
