"""``python -m pytest_dlperf.worker SPEC.json``: one rank of one run (:mod:`.main`).

A fresh worker of one rank first imports what a forked one finds imported (:func:`.forkserver.import_as_forked`):
the two starts then differ in nothing :mod:`.process_state` records but what is each process's own.
"""

from . import lifecycle
from .distributed import ranks_from_env
from .lifecycle import leave
from .main import main

lifecycle.own_signals()  # as a forked worker's, whatever the session's launch left ignored
if lifecycle.START == "fresh" and not ranks_from_env().distributed:  # torchrun's, srun's or mpirun's ranks too
    from .forkserver import import_as_forked

    try:
        import_as_forked()
    except Exception:  # noqa: BLE001 - a module that cannot import fails the run in main(), with a result
        pass
leave(main())
