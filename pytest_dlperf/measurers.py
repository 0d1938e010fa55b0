"""Which function measures a case, by the kind of its spec: a registry, not an if-chain.

A model our worker trains (:class:`~pytest_dlperf.models.ModelSpec`) is measured by
:func:`pytest_dlperf.runs.measure`; a command case (:class:`~pytest_dlperf.commands.CommandSpec`)
by :func:`pytest_dlperf.commands.measure.measure`.  Both take ``(case, spec, params, workdir,
launcher, on_progress)`` and return the same :class:`~pytest_dlperf.runs.Attempt`, so the
session judges and reports every case alike.
"""

from __future__ import annotations

from collections.abc import Callable

from . import runs
from .commands import measure as command_measure
from .commands.spec import CommandSpec
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
