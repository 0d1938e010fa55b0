"""Case kinds: what a kind of case is (two methods), what it is given and what it gives back.

A kind measures a case and judges what it measured::

    measure(plan: Plan, runner: Runner) -> Measurement
    judge(measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement

The session (:mod:`.session`) does everything else, the same for every kind: it resolves the case's plan and
reference, records the case from its start (an interrupted case is recorded too), turns a failed run into an
ERROR and a remote rank's run into REMOTE, applies the session's policies to the judgement once
(:func:`pytest_dlperf.gate.policy.settle`: ``--dlperf-inconclusive``, the never-deciding nights; a save's
refusal), and records the result, the test's properties and pytest-benchmark's files.

Kinds are registered (:func:`register_kind`, :data:`KINDS`) with a predicate that says which cases are theirs;
the first registered kind whose predicate holds runs a case.  A conftest registers its own the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ...cases import Case
from ...gate.policy import Policy
from ...launch.workers import RunParams
from ...models import ModelSpec
from ...registry import Registry
from ...results.case import Figures
from ...results.judgement import Judgement
from ...results.runs import AttemptRecord, RunRecord
from ..references import CaseReference
from ..runner import Runner


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a case's ``measure`` is given: the case, its model, its run parameters, its label in messages, its
    folder, what it is judged against (its baseline entry, if any, is ``reference.entry``; the reference can decide
    when to stop) and whether it is measured for a baseline being saved."""

    case: Case
    spec: ModelSpec
    params: RunParams
    label: str
    folder: Path
    reference: CaseReference
    save: bool = False


@dataclasses.dataclass(frozen=True)
class Measurement(Figures):
    """What a case's ``measure`` gives back: its unit and runs (as attempts), its figures (:class:`Figures`, the
    results' fields of the same names: a kind sets those it has), and whatever else its ``judge`` reads
    (``value``)."""

    unit: str
    attempts: list[AttemptRecord] = dataclasses.field(default_factory=list)
    #: The kind's own, for its ``judge``.
    value: Any = None

    @classmethod
    def of_runs(cls, unit: str, runs: list[RunRecord], **figures: Any) -> Measurement:
        """Runs judged by something other than a pooled figure (a time to target): kept as one attempt."""
        return cls(unit, [AttemptRecord(None, runs)], **figures)


class CaseKind(Protocol):
    """A kind of case: how one is measured, and how what was measured is judged."""

    def measure(self, plan: Plan, runner: Runner) -> Measurement: ...

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement: ...


@dataclasses.dataclass(frozen=True)
class Registered:
    """A kind in the registry: its name, the kind and which cases are its (``applies(case, spec)``)."""

    name: str
    kind: CaseKind
    applies: Callable[[Case, ModelSpec], bool]
    #: Whether it times training throughput (the only kind an A/B session or --dlperf-data-only runs).
    throughput: bool = False


#: The case kinds, in the order they are asked whether a case is theirs (a conftest's first: :func:`register_kind`).
KINDS: Registry[Registered] = Registry(
    "case kind", same=lambda old, new: type(old.kind).__qualname__ == type(new.kind).__qualname__)


def register_kind(name: str, kind: CaseKind, applies: Callable[[Case, ModelSpec], bool], *,
                  throughput: bool = False, last: bool = False) -> None:
    """Register ``kind`` for the cases ``applies(case, spec)`` holds for.  A kind registered later is asked
    before those registered earlier (a conftest's kind before the built-in ones), unless ``last``."""
    registered = Registered(name, kind, applies, throughput)
    KINDS.add(name, registered)  # a name taken by another kind: ValueError
    if last:
        return
    earlier = {key: value for key, value in KINDS.snapshot().items() if key != name}
    KINDS.restore({name: registered, **earlier})


def kind_of(case: Case, spec: ModelSpec) -> Registered:
    """The kind that runs ``case``: the first of :data:`KINDS` whose predicate holds."""
    return next(kind for kind in KINDS.values() if kind.applies(case, spec))
