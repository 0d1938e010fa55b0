"""The watching parent of an external command: the command dies with its controller, SIGKILL included.

A worker of ours watches its controller itself (:mod:`pytest_dlperf.worker.watchdog`); a
training script of someone else's cannot be asked to.  So the controller starts the command
through this small process, ``python -I -S guard.py COMMAND...``, as the leader of the run's
process group (:func:`pytest_dlperf.launch.process.run_command`):

* it starts the command as its child, in the same process group, and waits for whichever ends first:
  the command or the controller (its parent, watched through a pidfd: the kernel wakes it,
  no polling; a 0.5 s poll of ``getppid()`` where there are no pidfds);
* the command ended: the guard ends with the command's status (a signal as the same signal),
  so the controller reads it as if it had started the command itself;
* the controller went away (SIGKILL, a crash, a node's OOM killer: nothing of it could clean
  up): the guard sends SIGTERM to its process group and to every process that carries the
  run's ``DLPERF_RUN_ID`` (torchrun's ranks, each in a session of its own; ``srun`` and
  ``mpirun`` end their ranks on SIGTERM), SIGKILL to what is left after a grace, and exits;
* the controller stops the run once its log has the steps the case needs (SIGINT to the process
  group, :func:`pytest_dlperf.launch.process.run_command`'s ``done``): the guard lets the SIGINT
  pass (a handler that does nothing, which its command does not inherit) and still ends as its
  command does.

It needs nothing from the command, and runs on every launcher: it wraps the launcher's
command line (``torchrun``, ``srun``, ``mpirun``) as it wraps a plain script.  It is run as a
file with the interpreter's isolated mode and no ``site``, so it imports the standard library
only and starts in a few milliseconds; it never imports pytest-dlperf.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time

RUN_ID_VARIABLE = "DLPERF_RUN_ID"  # pytest_dlperf.launch.process.RUN_ID_VARIABLE
GRACE_SECONDS = 5.0
POLL_SECONDS = 0.5
#: The exit status where the command cannot be started, as a shell's ("command not found").
CANNOT_RUN = 127


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or the process is gone
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid``, or None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def _tagged(run_id: str | None, pid: int) -> bool:
    if not run_id:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{RUN_ID_VARIABLE}={run_id}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def run_processes(pgid: int, run_id: str | None) -> list[int]:
    """The live processes of the run but this one: those of group ``pgid`` and those tagged with ``run_id``."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        stat = _stat(pid)
        if stat is not None and stat[0] != "Z" and (stat[1] == pgid or _tagged(run_id, pid)):
            found.append(pid)
    return found


def end_run(child: int, grace: float = GRACE_SECONDS) -> None:
    """SIGTERM the run's processes (our group, the tagged ones), SIGKILL what is left after ``grace``."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # our own group's SIGTERM is for the others
    pgid, run_id = os.getpgid(0), os.environ.get(RUN_ID_VARIABLE)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in run_processes(pgid, run_id):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 1.0)
        while time.monotonic() < deadline:
            _reap(child)
            if not run_processes(pgid, run_id):
                return
            time.sleep(0.05)


def _reap(child: int) -> int | None:
    """The child's wait status once it has ended (reaped), else None."""
    try:
        pid, status = os.waitpid(child, os.WNOHANG)
    except ChildProcessError:
        return 0
    return status if pid == child else None


def exit_as(status: int) -> None:
    """End this process as the wait status ``status`` says the command ended: its exit code, or its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not end a process
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _start(argv: list[str]) -> int:
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"pytest-dlperf: cannot run {argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(CANNOT_RUN)
    return child


def _let_pass(_signum: int, _frame: object) -> None:
    """The run's SIGINT is for its command: the guard waits for it to end, and ends as it did."""


def _controller_gone(controller: int) -> bool:
    return os.getppid() != controller


def watch(argv: list[str]) -> None:
    """Run ``argv`` under the watch; never returns."""
    controller = os.getppid()
    watched = _pidfd(controller)
    if controller == 1 or _controller_gone(controller):
        os._exit(1)  # the controller went before the command could start: start nothing
    signal.signal(signal.SIGINT, _let_pass)  # a handler, not SIG_IGN: the command gets SIGINT's default back
    child = _start(argv)
    ended = _pidfd(child)
    while True:
        if watched is not None and ended is not None:
            ready, _, _ = select.select([watched, ended], [], [])
        else:
            time.sleep(POLL_SECONDS)
            ready = []
        status = _reap(child)
        if status is not None:
            exit_as(status)
        if watched in ready or _controller_gone(controller):
            end_run(child)
            os._exit(1)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write("usage: guard.py COMMAND [ARG...]\n")
        os._exit(2)
    watch(argv)


def wrap(command: list[str], python: str = sys.executable) -> list[str]:
    """``command`` run under the guard (what :func:`pytest_dlperf.launch.process.run_command` starts)."""
    return [python, "-I", "-S", os.path.abspath(__file__), "--", *command]


if __name__ == "__main__":
    main()
