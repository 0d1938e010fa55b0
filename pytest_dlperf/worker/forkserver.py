"""The fork server: one process that has imported what every run imports, and forks each run's worker from it.

``python -m pytest_dlperf.worker.forkserver`` imports torch, numpy, psutil and the worker's own modules
once (:data:`PRELOAD`), checks that it never initialized CUDA, and then forks one process per
:class:`~pytest_dlperf.protocol.ForkRequest` read from its stdin: ``python -m MODULE ARGS`` without the
interpreter's start, our worker or torchrun's agent, whose ranks torchrun forks from it in turn
(:func:`run_rank`).  Everything is imported before the first fork, ``torch._dynamo`` too: constructing any
torch optimizer imports it (1.5 s of CPU, sympy with it), so a worker forked without it would pay that itself.
Each worker is still a fresh process of its own, as an exec'd one is:

* its own pid, in a session and process group of its own (``setsid``), its stdin ``/dev/null`` and its
  stdout and stderr the run's log files;
* its own environment: the request's, whole (``os.environ`` and the C library's), and the run's
  ``DLPERF_RUN_ID`` written over the placeholder of the server's own environment block
  (:func:`tag_run`), so that ``/proc/PID/environ`` (how the controller and the interference probe find a
  run's processes) carries it, in the worker and in every process it forks;
* its own CUDA context: the server never initialized CUDA (:func:`check_clean`), so the worker's first
  CUDA call makes one, as in a fresh process;
* its own random state: torch's generators at the start of their streams (the server ran no torch
  operation), from a seed of its own where torch draws one per process; Python's ``random`` reseeds itself
  at a fork, numpy's global generator and multiprocessing's authentication key are drawn again
  (:func:`reseed`);
* its own memory cap, thread pool and process group (torch.distributed): the worker makes them, after the
  fork, as an exec'd worker does.

What the server cannot give a forked worker is what a process takes from its environment only when it
starts: glibc's tunables (``dlperf_malloc``), the OpenMP and BLAS variables, ``PYTHON*``, ``LD_*``.  The
controller keeps one server per such environment (:mod:`pytest_dlperf.launch.forkserver`), so each worker's
process was started with the variables its run has.  Python's hash seed is the server's.

The server ends when its stdin closes (the controller ended, however it ended) or on SIGTERM, removing its
log (:func:`main`), and takes the process groups of the workers it started with it; a worker whose server
died sees its parent change and kills its own group (:mod:`.watchdog`).  Ctrl-C does not reach it (a session
of its own, SIGINT ignored): the controller ends the run it interrupts.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import sys
import time
from typing import NoReturn

from ..protocol import RUN_ID_PLACEHOLDER, ForkRequest

RUN_ID_VARIABLE = "DLPERF_RUN_ID"  # the controller's pytest_dlperf.launch.process.RUN_ID_VARIABLE
#: Imported once, in this order, before the first fork: all a throughput or convergence run imports before its
#: first step (``torch._dynamo``: what constructing a torch optimizer imports).
PRELOAD = ("numpy", "psutil", "torch", "torch.optim", "torch._dynamo", "torch.distributed",
           "torch.utils.flop_counter",
           "pytest_dlperf.worker.main", "pytest_dlperf.worker.prepare",
           "pytest_dlperf.worker.training", "pytest_dlperf.worker.distributed", "pytest_dlperf.worker.telemetry",
           "pytest_dlperf.worker.interference", "pytest_dlperf.worker.flops", "pytest_dlperf.worker.memory",
           "pytest_dlperf.worker.convergence", "pytest_dlperf.worker.watchdog", "pytest_dlperf.models",
           "pytest_dlperf.data", "pytest_dlperf.environment", "pytest_dlperf.jsonio")
#: Imported when installed: the NVML bindings the telemetry uses (importing them initializes nothing) and
#: torchvision (0.15 s once ``torch._dynamo`` is in).
OPTIONAL = ("pynvml", "torchvision")
KILL_GRACE_SECONDS = 2.0


def preload() -> None:
    """Import :data:`PRELOAD` (and what of :data:`OPTIONAL` is installed), and what the worker works out once."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in OPTIONAL:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from .main import versions

    versions()  # the installed versions every result carries, read from the packages' metadata once


def import_as_forked() -> None:
    """In a fresh worker of one rank: import what a forked worker finds imported (:data:`PRELOAD`, what is
    installed of :data:`OPTIONAL`), in the server's order, so that both starts run with the
    same modules and import hooks, as :mod:`.process_state` records them.  The environment is left as the process
    started with it, as :func:`become` leaves a forked worker's (the request's, whole): what an import writes into
    it (torchvision's sets ``TORCHINDUCTOR_CACHE_DIR``) is the server's in a forked worker, and goes here too."""
    started = dict(os.environ)
    preload()
    if dict(os.environ) != started:
        os.environ.clear()
        os.environ.update(started)


def check_clean() -> None:
    """Raise unless this process is one a worker may be forked from: CUDA never initialized, one thread of
    Python's own (a fork copies only the thread that forks)."""
    import threading

    import torch

    if torch.cuda.is_initialized():
        raise RuntimeError("the fork server initialized CUDA: a forked worker would inherit its context")
    if threading.active_count() != 1:
        names = [thread.name for thread in threading.enumerate()]
        raise RuntimeError(f"the fork server runs Python threads {names}: a fork would copy their locks")


def send(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def serve(requests: int, replies: int) -> ForkRequest | None:
    """Fork a worker for each request read from ``requests``, report it and its end on ``replies``.

    Returns None in the server, once ``requests`` is closed and its workers are gone; returns the request in
    each forked worker, with what is the server's (its pipes, its signal handlers) let go of.
    """
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select through the wake-up pipe
    signal.signal(signal.SIGTERM, lambda *_: None)
    live: set[int] = set()
    pending = b""
    while True:
        ready, _, _ = select.select([requests, wake_read], [], [])
        if wake_read in ready:
            signals = os.read(wake_read, 512)
            reap(live, replies)
            if signal.SIGTERM in signals:
                break
        if requests not in ready:
            continue
        chunk = os.read(requests, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = ForkRequest.from_line(line)
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as exc:
                send(replies, {"failed": f"fork: {exc}"})
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                for fd in (wake_read, wake_write, requests, replies):
                    os.close(fd)
                return request
            live.add(pid)
            send(replies, {"started": pid})
    shut_down(live, replies)
    return None


def reap(live: set[int], replies: int) -> None:
    """Report every worker that has ended (its exit status as ``subprocess`` gives it: negative, a signal)."""
    while live:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)
        try:
            send(replies, {"ended": pid, "returncode": os.waitstatus_to_exitcode(status)})
        except OSError:  # the controller is gone: nobody to tell
            pass


def shut_down(live: set[int], replies: int) -> None:
    """The server ends: the process group of every worker it started goes with it (SIGTERM, then SIGKILL)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in live:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + KILL_GRACE_SECONDS
        while live and time.monotonic() < deadline:
            reap(live, replies)
            time.sleep(0.02)
        if not live:
            return


def become(request: ForkRequest, server: int) -> None:
    """In a forked worker: make this process the one ``python -m pytest_dlperf.worker SPEC`` would be.  Exits
    at once if the ``server`` died already: the worker's watch of its parent (:mod:`.watchdog`) would start
    too late to see it go."""
    if os.getppid() != server:
        os._exit(70)
    from . import lifecycle

    lifecycle.START = "forked"
    os.setsid()
    lifecycle.own_signals()
    os.chdir(request.cwd)  # first: the spec's path may be relative to it, as an exec'd worker's is
    stdin = os.open(os.devnull, os.O_RDONLY)
    stdout = os.open(request.stdout, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    stderr = os.open(request.stderr, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request.env)
    tag_run(request.env.get(RUN_ID_VARIABLE))
    sys.path[0] = request.cwd  # as ``python -m`` puts the working folder first
    sys.argv = [request.module, *request.argv]  # runpy puts the module's file first
    reseed()


def tag_run(run_id: str | None) -> None:
    """Write ``run_id`` over :data:`~pytest_dlperf.protocol.RUN_ID_PLACEHOLDER` in this process's environment
    block: the memory ``/proc/self/environ`` shows, which a fork copies and ``os.environ`` never changes (the
    kernel's ``env_start`` and ``env_end``, fields 50 and 51 of ``/proc/self/stat``)."""
    if run_id is None:
        return
    needle = f"{RUN_ID_VARIABLE}={RUN_ID_PLACEHOLDER}\0".encode()
    if len(run_id) != len(RUN_ID_PLACEHOLDER):
        raise ValueError(f"a run id of {len(run_id)} characters, not {len(RUN_ID_PLACEHOLDER)}: {run_id!r}")
    with open("/proc/self/stat", encoding="utf-8") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])
    offset = ctypes.string_at(start, end - start).find(needle)
    if offset < 0:
        raise RuntimeError(f"the fork server's environment has no {RUN_ID_VARIABLE} placeholder")
    ctypes.memmove(start + offset + len(RUN_ID_VARIABLE) + 1, run_id.encode(), len(run_id))


#: torch's start seed in builds that do not draw one per process (``default_rng_seed_val``).
TORCH_FIXED_SEED = 67280421310721


def reseed() -> None:
    """Draw again what a fresh process draws at its start and a fork copies: torch's CPU generator's seed where
    torch draws one per process (as 2.14 does; a build that starts every process at its fixed seed is left
    at it), numpy's global generator and multiprocessing's authentication key.  Python's ``random``
    reseeds itself at a fork; the CUDA generators start in the worker, with its CUDA context."""
    import multiprocessing

    import numpy
    import torch

    if torch.initial_seed() != TORCH_FIXED_SEED:
        torch.default_generator.seed()
    numpy.random.seed()
    multiprocessing.current_process().authkey = os.urandom(32)


def run_module(module: str) -> NoReturn:
    """In a forked process: ``python -m module`` with ``sys.argv``'s arguments, ended as the interpreter would end
    it (a ``SystemExit``'s status; 1 and the traceback for an exception), without its teardown
    (:func:`~.lifecycle.leave`; our worker's ``__main__`` ends itself so)."""
    import runpy
    import traceback

    from .lifecycle import leave

    code: int | str | None = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except Exception:  # noqa: BLE001 - as the interpreter reports an uncaught exception
        traceback.print_exc()
        code = 1
    if isinstance(code, str):
        print(code, file=sys.stderr)
    leave(code if isinstance(code, int) else (0 if code is None else 1))


def run_rank() -> None:
    """A rank that torchrun forked (``--start-method fork``, :mod:`.rank`) from an agent this server forked: made
    the process an exec'd rank is (a session of its own, as torchrun starts one; default signal handlers, not the
    agent's; its own random state), then our worker with the spec ``sys.argv[1]``.  A failed rank ends with its
    exit status, as an exec'd one, so that torchrun sees it; one that measured returns to torchrun's wrapper,
    which records its return and ends it (without the interpreter's teardown)."""
    from .lifecycle import leave, own_signals
    from .main import main as worker_main

    os.setsid()
    own_signals()
    reseed()
    code = worker_main(sys.argv[1:2])
    if code:
        leave(code)


def main(argv: list[str] | None = None) -> int:
    """The server: its requests and replies on the stdin and stdout it was given; what it prints goes to its
    stderr.  Returns its exit status; in a forked process it never returns (:func:`run_module`).

    ``argv``: the file its stderr goes to, if any, which it removes when its requests end (its controller
    closed them, or ended however it ended, SIGKILL included, and so cannot remove it); a server that fails
    leaves it for the controller to read and remove."""
    argv = sys.argv[1:] if argv is None else argv
    requests, replies = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    started = time.monotonic()
    preload()
    check_clean()
    send(replies, {"ready": os.getpid(), "seconds": round(time.monotonic() - started, 3)})
    server = os.getpid()
    request = serve(requests, replies)
    if request is None:
        for log in argv[:1]:
            try:
                os.unlink(log)
            except OSError:
                pass
        return 0
    become(request, server)
    run_module(request.module)


if __name__ == "__main__":
    sys.exit(main())
