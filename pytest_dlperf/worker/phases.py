"""Where a window's time went: the phases of a training step, per measured window (issue 49).

The worker times each step of a window in phases (:mod:`.phaseclock`) and writes, per window, the seconds per
step of each (a window's ``phases``, :meth:`Phases.to_dict`):

* ``data``: waiting for the next batch (``TrainingStep.next_batch``; near 0 with synthetic data);
* ``forward``: the model and the loss (under autocast where the precision sets it);
* ``backward``: ``loss.backward()`` (through the ``GradScaler`` under amp); on several ranks only its
  computation, up to when the last gradient bucket is ready and its all-reduce starts;
* ``comm``: several ranks only: the rest of the backward, the wait for the gradients' all-reduce that the
  computation did not hide (exposed communication);
* ``optimizer``: the optimizer's step (and the scaler's update) and ``zero_grad``.

A command case's log gives what it says (:mod:`pytest_dlperf.commands`): ``data`` and ``compute``, the rest of
the step as the script times it (DLLogger's ``train.compute_time``).  Any phase may be absent.

Their sum is at most the window's step time (its seconds over its steps); the remainder, :attr:`Phases.other`,
is the loop between steps and the window's own start and end (its synchronization).  The result's
``phase_timing`` (:class:`PhaseTiming`) says how they were timed, what timing cost and, where it would have
cost more than :data:`COST_LIMIT` of a step, that phases were off and why.

This module is the document's side: plain Python, no torch, read by the controller as well
(:func:`pooled`: a run's or a case's phases from its windows).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

#: The phases in the order a step runs them; ``comm`` only on several ranks; ``compute`` only from a log.
NAMES = ("data", "compute", "forward", "backward", "comm", "optimizer")
#: The step time no phase accounts for.
OTHER = "other"
#: The key of a case's phases (:meth:`Phases.case_dict`) that holds its step time (pytest_dlperf.gate.attribution).
STEP = "step"
#: The most of a step that timing its phases may cost: above it they are off (:class:`PhaseTiming`).
COST_LIMIT = 0.01


@dataclasses.dataclass(frozen=True)
class Phases:
    """Seconds per step of each phase of one window (or, :func:`pooled`, the medians of several windows'), and
    the window's step time (its seconds over its steps).  A phase its source did not time is None: ``comm`` on one
    rank, ``compute`` from the worker, all but ``data`` and ``compute`` from a command's log."""

    step_seconds: float
    data: float | None = None
    forward: float | None = None
    backward: float | None = None
    optimizer: float | None = None
    comm: float | None = None
    compute: float | None = None

    @property
    def other(self) -> float:
        """The step time outside every phase (never negative)."""
        return max(0.0, self.step_seconds - sum(self.named().values()))

    def named(self) -> dict[str, float]:
        """The timed phases, in :data:`NAMES` order (``comm`` only where it was timed)."""
        return {name: getattr(self, name) for name in NAMES if getattr(self, name) is not None}

    def seconds(self) -> dict[str, float]:
        """Each phase's seconds per step, ``other`` last: together the step time (or more, for pooled medians)."""
        return {**self.named(), OTHER: self.other}

    def shares(self) -> dict[str, float]:
        """Each phase's fraction of the step time, ``other`` last."""
        step = self.step_seconds
        return {name: (value / step if step > 0 else 0.0) for name, value in self.seconds().items()}

    def largest(self) -> str:
        """The name of the phase (``other`` included) that took the most time."""
        seconds = self.seconds()
        return max(seconds, key=seconds.__getitem__)

    def to_dict(self) -> dict[str, float]:
        """A window's ``phases`` object: the timed phases' seconds per step."""
        return self.named()

    def case_dict(self) -> dict[str, float]:
        """A case's ``phases`` object: its step time (:data:`STEP`) and each phase's seconds, ``other`` last."""
        return {STEP: self.step_seconds, **self.seconds()}

    def only(self, names: Iterable[str]) -> Phases:
        """These phases alone: the time of the others goes to :attr:`other`."""
        keep = set(names)
        return dataclasses.replace(self, **{name: None for name in NAMES if name not in keep})

    @classmethod
    def from_case(cls, phases: Mapping[str, float] | None) -> Phases | None:
        """A case's phases from its ``phases`` object (:meth:`case_dict`); None without a step time."""
        if not phases or not phases.get(STEP):
            return None
        return cls(phases[STEP], **{name: phases[name] for name in NAMES if phases.get(name) is not None})

    @classmethod
    def from_window(cls, window: Mapping[str, Any]) -> Phases | None:
        """A result window's phases (None for a window without any: an older result, or phases off)."""
        phases = window.get("phases")
        if not phases or not window.get("steps"):
            return None
        return cls(window["seconds"] / window["steps"], **{name: phases.get(name) for name in NAMES})

    @classmethod
    def within(cls, step_seconds: float, **seconds: float | None) -> Phases:
        """Phases whose sum is at most ``step_seconds``: scaled down together where two clocks (the device's
        events, the host's window) disagree by more than it."""
        total = sum(value for value in seconds.values() if value is not None)
        scale = step_seconds / total if total > step_seconds > 0 else 1.0
        return cls(step_seconds, **{name: None if value is None else value * scale
                                    for name, value in seconds.items()})


def pooled(windows: Iterable[Mapping[str, Any]]) -> Phases | None:
    """The median of each phase over the ``windows`` that have phases (a run's, or every run's of a case), and
    their median step time; None where none has (an older result, phases off).  A phase is pooled where every such
    window has it (``comm``: several ranks).  Medians of parts need not add up to the median whole:
    :attr:`Phases.other` is 0 where they pass it."""
    each = [phases for phases in map(Phases.from_window, windows) if phases is not None]
    names = [name for name in NAMES if each and all(getattr(p, name) is not None for p in each)]
    if not names:
        return None
    return Phases(statistics.median(p.step_seconds for p in each),
                  **{name: statistics.median(getattr(p, name) for p in each) for name in names})


def shared(now: Mapping[str, float] | None,
           then: Mapping[str, float] | None) -> tuple[dict[str, float], dict[str, float]] | None:
    """A case's phases and its baseline's (``phases`` objects, :meth:`Phases.case_dict`) on the phases both timed,
    each one's other phases folded into its ``other``: what a FAIL's line may compare.  Unchanged where both timed
    the same; None where either has none or they share no phase (a log's against the worker's, say)."""
    mine, theirs = Phases.from_case(now), Phases.from_case(then)
    if mine is None or theirs is None:
        return None
    common = set(mine.named()) & set(theirs.named())
    if not common:
        return None
    if set(now) == set(then):
        return dict(now), dict(then)
    return mine.only(common).case_dict(), theirs.only(common).case_dict()


@dataclasses.dataclass(frozen=True)
class PhaseTiming:
    """A result's ``phase_timing``: how this rank timed its phases.

    ``timer``: ``perf_counter`` (the host's clock, on the CPU) or ``cuda-events`` (CUDA events recorded between
    the phases on the step's stream, read after the window's synchronization).  ``marks_per_step``: the marks a
    step records (5, 6 with the all-reduce's); ``mark_seconds``: the host's time to record one (the fastest of a
    few rounds, before the windows); ``cost``: their share of a step's seconds in the warm-up (or the first
    window, without a warm-up).  ``off``: why the windows have no phases (their cost above :data:`COST_LIMIT`);
    absent where they have them.
    """

    timer: str
    marks_per_step: int
    mark_seconds: float
    cost: float | None = None
    off: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhaseTiming:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})
