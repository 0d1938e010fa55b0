"""A worker never outlives its controller: the parent watch every rank starts first.

The controller tags each run's processes and kills their process group when a case ends,
times out or is interrupted (:mod:`pytest_dlperf.launch.process`).  A controller killed with
SIGKILL cannot; so each worker watches its parent and the controller itself, and takes its
own process group down when either goes away.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time


def watch_parent() -> None:
    """In a worker: kill our own process group if our parent or the controller goes away.

    The parent is the controller for a single-process case, or the launcher's agent
    (torchrun, slurmstepd, orted) for a rank; a parent that dies leaves us re-parented.
    """
    controller = os.environ.get("DLPERF_PARENT_PID")
    same_host = os.environ.get("DLPERF_PARENT_HOST") == socket.gethostname()
    controller_pid = int(controller) if controller and same_host else None
    parent = os.getppid()

    def gone() -> bool:
        if os.getppid() != parent:
            return True
        if controller_pid is None:
            return False
        try:
            os.kill(controller_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def loop() -> None:
        while not gone():
            time.sleep(1.0)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=loop, name="dlperf-parent-watch", daemon=True).start()
