"""Convergence cases: train to a target accuracy and gate the time it took (the controller's side).

Throughput alone does not show a broken training: an AMP loss-scaling bug or a wrong
learning-rate scaling at a larger global batch can keep the img/s and lose the accuracy.
A convergence case (a baseline entry with a ``target``, schema version 2) trains the case's
model on a real data set's train split until its validation metric reaches the target, as
MLPerf Training scores time to a target accuracy (https://mlcommons.org/benchmarks/training/).

* :mod:`.goal`: the case's target, budget and recipe, checked at collection;
* :mod:`.figures`: a run's figures (time, epochs and samples to target, the curve) and
  their median over the runs, each run with its own seed;
* :mod:`.verdict`: target not reached fails; the time to target is gated against the
  baseline's, lower is better;
* the case kind that runs one through the session's launcher and records its result is
  :mod:`pytest_dlperf.controller.convergence`.

The worker's side is :mod:`pytest_dlperf.worker.convergence`; the two meet at
:class:`pytest_dlperf.protocol.ConvergenceSpec` and the worker result's ``convergence``.
"""

from __future__ import annotations

from .figures import RunFigures, pooled
from .goal import check_cases, goal_of
from .verdict import judge_time

__all__ = ["RunFigures", "check_cases", "goal_of", "judge_time", "pooled"]
