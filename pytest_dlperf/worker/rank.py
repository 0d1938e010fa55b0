"""What each rank runs when torchrun forks its ranks (``--start-method fork --run-path`` this file) from an agent
the fork server forked (:func:`pytest_dlperf.launch.launchers.LocalLauncher.plan`): our worker, in a process
made the one an exec'd rank is (:func:`pytest_dlperf.worker.forkserver.run_rank`).  torchrun runs it with
``runpy.run_path``; imported, it does nothing."""

if __name__ == "__main__":
    from pytest_dlperf.worker.forkserver import run_rank

    run_rank()
