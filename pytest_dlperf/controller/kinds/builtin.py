"""The built-in case kinds, registered in the order they are asked (:data:`~.kinds.KINDS`): a convergence case
(:mod:`.convergence`), a time-to-train command (:mod:`.command`), else a throughput case (:mod:`.throughput`).
An A/B session's throughput cases are paired (:mod:`.against`), and ``--dlperf-data-only``'s time the loader
alone (:mod:`.data_only`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import data
from ...cases import Case
from ...commands import measure as command_measure
from ...commands.spec import CommandSpec
from ...commands.train_time import judged_by_time
from ...launch import workers
from ...models import ModelSpec
from ..runner import MEASURERS
from . import Registered, register_kind
from .time_to_target import ConvergenceKind
from .time_to_train import TimeToTrainKind
from .against import PairedKind
from .data_only import DataOnlyKind
from .throughput import ThroughputKind, saved_runs

if TYPE_CHECKING:
    from ...ab import AB

__all__ = ["DATA_ONLY", "paired", "mode_skip_reason", "saved_runs"]

MEASURERS.add(ModelSpec.__name__, workers.measure)
MEASURERS.add(CommandSpec.__name__, command_measure.measure)
register_kind("convergence", ConvergenceKind(), lambda case, spec: case.converges, last=True)
register_kind("time-to-train command", TimeToTrainKind(), judged_by_time, last=True)
register_kind("throughput", ThroughputKind(), lambda case, spec: True, throughput=True, last=True)
#: ``--dlperf-data-only``'s kind, for the throughput cases of such a session.
DATA_ONLY = Registered("data-only", DataOnlyKind(), lambda case, spec: True)


def paired(ab: AB) -> Registered:
    """An A/B session's kind, for its throughput cases."""
    return Registered("paired", PairedKind(ab), lambda case, spec: True)


def mode_skip_reason(case: Case, registered: Registered, ab: bool, data_only: bool) -> str | None:
    """Why an A/B session (``ab``, ``--dlperf-against``) or a ``--dlperf-data-only`` one does not run ``case``
    (of kind ``registered``), or None: both time throughput cases, an A/B session at a fixed batch."""
    if ab and not registered.throughput:
        return f"--dlperf-against compares throughput; this is a {registered.name} case"
    if ab and case.searches_batch:
        return "--dlperf-against compares a fixed batch: batch size max is not searched in an A/B session"
    if ab and data_only:
        return "--dlperf-against compares training throughput, not --dlperf-data-only"
    if data_only and not registered.throughput:
        return "--dlperf-data-only times data loaders; a convergence case trains to a target"
    if data_only and data.backend_of(case.settings_dict) == data.SYNTHETIC:
        return ("--dlperf-data-only times a data loader; this case's data is synthetic "
                "(set data=torchvision or data=dali)")
    return None
