"""What every kind of run does around its training, on each rank: rank 0's progress file, what the run holds
and the order it lets go of it, and its timing.  Shared by a throughput run (:func:`pytest_dlperf.worker.main.run`)
and a convergence run (:func:`pytest_dlperf.worker.convergence.run`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, NoReturn

from ..protocol import Progress, WorkerSpec

#: How this process started: ``fresh`` (an interpreter of its own) until the fork server's :func:`~.forkserver.become`
#: makes it ``forked``.
START = "fresh"


def own_signals() -> None:
    """The signal dispositions every worker runs with, however it started: SIGINT raises ``KeyboardInterrupt``,
    SIGTERM, SIGQUIT and SIGCHLD their defaults.  Not what it inherits: a fresh interpreter started by a session
    that a non-interactive shell ran in the background (``cmd &``, nohup) finds SIGINT and SIGQUIT ignored (POSIX
    shells ignore them for asynchronous commands, and Python then installs no SIGINT handler), a forked one the
    fork server's; the two starts would differ in them (:mod:`.process_state`)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)


class ProgressFile:
    """Rank 0's ``progress.json`` (:class:`~pytest_dlperf.protocol.Progress`); other ranks write none.

    Called with what changed; it keeps the last step time and the rest.  Never called inside
    a measured window: a write is a file and a rename (no fsync: the controller reads it while the
    run goes on, nobody after a crash).
    """

    def __init__(self, path: str | None, warmup_total: int, windows_total: int, window_steps: int | None = None,
                 samples_per_step: float | None = None):
        self.path = path
        self.window_steps = window_steps
        self.state: dict[str, Any] = {"step_seconds": None, "remaining_steps": None, "warmup_total": warmup_total,
                                      "windows_total": windows_total, "samples_per_step": samples_per_step}

    def __call__(self, step_seconds: float | None = None, remaining_steps: int | None = None, **where: Any) -> None:
        if not self.path:
            return
        from ..jsonio import write_atomic

        if step_seconds is not None:
            self.state["step_seconds"] = step_seconds
        if remaining_steps is not None:
            self.state["remaining_steps"] = remaining_steps
        self.state.update(where)
        if self.window_steps is not None and self.state.get("warmup_done") is not None:
            self.state["steps_done"] = self.state["warmup_done"] + self.window_steps * (self.state.get("windows_done")
                                                                                         or 0)
        write_atomic(self.path, json.dumps(Progress.now(**self.state).to_dict()), durable=False)


def launched_at(spec: WorkerSpec) -> float:
    """When the controller started this run's process (``time.time()``), else now."""
    return float(spec.launched_at) if spec.launched_at is not None else time.time()


class Held:
    """What a run holds while it trains, let go in one order whatever happened (:meth:`close`): the telemetry
    sampler's thread (it must not outlive the run), the data source's workers, the model (the training step
    and any other reference to it: a DDP model goes before its process group, see
    :meth:`~pytest_dlperf.worker.distributed.ProcessGroup.close`), then the process group.

    Used as ``with Held(group) as held:``, the run keeping its step and model only in ``held``.
    """

    def __init__(self, group: Any = None, sampler: Any = None):
        self.group = group
        self.sampler = sampler
        self.source: Any = None
        self.step: Any = None
        self.model: Any = None  # another reference to the trained model (a convergence run's unwrapped one)
        self.last_loss: float | None = None  # the step's last loss, kept when the step is let go

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()  # after an exception: the thread must not outlive the run
        if self.source is not None:
            self.source.close()
        self.last_loss = self.step.last_loss if self.step is not None else None
        self.step = self.model = None
        if self.group is not None:
            self.group.close()


def timing(launched: float, marks: dict[str, float], windows: list[dict[str, Any]], *, total: float,
           warmup_seconds: float | None = None, **extra: float) -> dict[str, float]:
    """A result's ``timing``: setup (launch to the first step), warm-up, the windows' seconds, the run's total
    (launch to ``total``, a ``time.time()``) and ``extra`` (compile, convergence seconds)."""
    warmup = warmup_seconds if warmup_seconds is not None else marks["warmup_done"] - marks["first_step"]
    return {"setup_seconds": marks["first_step"] - launched, "warmup_seconds": warmup,
            "measured_seconds": sum(w["seconds"] for w in windows), "total_seconds": total - launched, **extra}


def leave(code: int) -> NoReturn:
    """End the worker with exit status ``code`` as the interpreter would, without its teardown.

    After the result is written a worker has nothing left to do, but an interpreter that imported torch,
    torchvision and ``torch._dynamo`` then spends one to two seconds freeing every module it imported (on
    the project's 2-core machine; more than a run of ``tiny`` measures).  So: wait for the threads Python
    would wait for, run the ``atexit`` functions (multiprocessing's, which ends the data loader's
    processes; logging's), flush stdout and stderr, and exit.  Nothing the worker wrote is in a buffer by
    then: its result, progress file and logs are closed files.  The threads are waited for as the
    interpreter does it (``threading._shutdown``: first the functions that tell thread pools to stop, as
    ``torch.compile``'s compile workers' pool, then the join), or where a Python has no such function
    not at all.
    """
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
