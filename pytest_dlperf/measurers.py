"""Which function measures a case, by the kind of its spec: a registry, not an if-chain.

A model our worker trains (:class:`~pytest_dlperf.models.ModelSpec`) is measured by
:func:`pytest_dlperf.launch.workers.measure`; a command case (:class:`~pytest_dlperf.commands.CommandSpec`)
by :func:`pytest_dlperf.commands.measure.measure`.  Both take ``(case, spec, params, workdir,
launcher, on_progress)`` and return the same :class:`~pytest_dlperf.launch.workers.Attempt`, so the
session judges and reports every case alike.

Cases judged by a time to train rather than a throughput run in a function of their own
(``run_case(session, case, entry, nodeid, properties)``), chosen the same way
(:func:`runner_for`): a built-in convergence case (:mod:`pytest_dlperf.convergence.run`), a
time-to-train command case (:mod:`pytest_dlperf.commands.train_time`).
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

from .launch import workers as runs
from .commands import measure as command_measure
from .commands import train_time
from .commands.spec import CommandSpec
from .convergence import run as convergence_run
from .models import ModelSpec

_MEASURERS: dict[type, Callable[..., runs.Attempt]] = {
    ModelSpec: runs.measure,
    CommandSpec: command_measure.measure,
}


def register_measurer(spec_type: type, measure: Callable[..., runs.Attempt]) -> None:
    """Make ``measure`` the function that measures cases whose spec is a ``spec_type``."""
    _MEASURERS[spec_type] = measure


def measurer_for(spec: object) -> Callable[..., runs.Attempt]:
    """The measure function of ``spec``'s most specific registered type."""
    for kind in type(spec).__mro__:
        if kind in _MEASURERS:
            return _MEASURERS[kind]
    raise TypeError(f"no measure function for a {type(spec).__name__}")


#: (whether a case is one of its kind, the function that runs such a case), first match wins.
_RUNNERS: list[tuple[Callable[[Any, ModelSpec], bool], Callable[..., None]]] = [
    (lambda case, spec: case.converges, convergence_run.run_case),
    (train_time.judged_by_time, train_time.run_case),
]


def register_runner(applies: Callable[[Any, ModelSpec], bool], run_case: Callable[..., None]) -> None:
    """Make ``run_case`` run the cases for which ``applies(case, spec)`` (before those registered so far)."""
    _RUNNERS.insert(0, (applies, run_case))


def runner_for(case: Any, spec: ModelSpec) -> Callable[..., None] | None:
    """The function that runs ``case`` where it is not measured as a throughput, else None."""
    return next((run_case for applies, run_case in _RUNNERS if applies(case, spec)), None)
