"""Launching a case's runs: how its ranks start, its processes, and what a run left.

:mod:`.launchers` (``local`` / ``torchrun`` / ``slurm`` / ``mpi``: how a case's ranks start, a registry),
:mod:`.process` (one run's process group and run id, its time limit from the worker's progress or its
log, no orphans), :mod:`.workers` (a case's runs as fresh worker processes: :class:`RunParams` in, run
records out, a failed run explained by the rank that failed first), :mod:`.forkserver` (a run's worker
forked by a fork server), :mod:`.threads` (the intra-op threads of a CPU case's ranks).
"""
