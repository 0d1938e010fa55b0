"""A case's judgement: one frozen value that says how a case was judged, made once and never edited as text.

A case kind's ``judge`` returns a :class:`Judgement`: the case's :class:`Status`, each gate's status
(:class:`Gate`), and the facts behind them as :class:`Reason` records.  A policy that changes a verdict (the
never-deciding nights, ``--dlperf-inconclusive``, a baseline save that refuses the case) makes a new value
(:meth:`Judgement.failing`); nothing reads a verdict back from its words.  The message a person reads is made
from the value in one place, :mod:`pytest_dlperf.reporting.verdicts`.

This module is on the package's ground floor: it imports nothing of the package but the enum base.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..protocol import ValueEnum


class Status(ValueEnum):
    """A case's verdict.  A ``str``, so ``Status.FAIL == "fail"`` and JSON holds the value."""

    PASS = "pass"
    IMPROVED = "improved"
    NO_BASELINE = "no-baseline"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # undecided at the run budget (pytest_dlperf.gate.sequential)
    ERROR = "error"
    SKIPPED = "skipped"
    REMOTE = "remote"  # a torchrun job across nodes: rank 0's node reports
    DATA_ONLY = "data-only"  # --dlperf-data-only: the loader alone, never judged

    __hash__ = str.__hash__


class Why(ValueEnum):
    """What a reason is about."""

    HEADLINE = "headline"  # the main gate's figures: the message's first line unless another gate failed
    EVIDENCE = "evidence"  # how the runs decided, or why they did not and what would
    BUSY = "busy"  # runs measured on a busy machine
    PROBE = "probe"  # what the host probes said
    SOURCE = "source"  # where the baseline came from
    GATE = "gate"  # another gate's line: scaling, GPU utilization
    POLICY = "policy"  # a policy that changed the status: never-deciding nights, --dlperf-inconclusive, a save
    NOTE = "note"  # anything else worth a line: warnings, mismatches, the loader
    ERROR = "error"  # why the case could not be measured (a crash's message, with its log's last lines)

    __hash__ = str.__hash__


class GateName(ValueEnum):
    """The gates a case can be judged by."""

    THROUGHPUT = "throughput"
    SCALING = "scaling"
    UTILIZATION = "gpu utilization"
    TIME_TO_TARGET = "time to target"
    PAIRED = "paired"
    DATA = "data"

    __hash__ = str.__hash__


@dataclasses.dataclass(frozen=True)
class Reason:
    """One fact of a judgement, one line of its message.

    ``word``: the status word the line begins with (``FAIL``, ``PASS``, ...), or None.  ``lead``: a failed
    gate's line that goes before the headline (a case whose throughput passed but whose scaling failed leads
    with its scaling)."""

    text: str
    why: Why = Why.NOTE
    word: Status | None = None
    lead: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"why": self.why.value, "text": self.text}
        if self.word is not None:
            out["word"] = self.word.value
        if self.lead:
            out["lead"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        word = data.get("word")
        return cls(data["text"], Why(data.get("why", Why.NOTE.value)), None if word is None else Status(word),
                   bool(data.get("lead", False)))


@dataclasses.dataclass(frozen=True)
class Gate:
    """One gate's own status (the case's is the worst of them)."""

    name: GateName
    status: Status


@dataclasses.dataclass(frozen=True)
class Judgement:
    """How a case was judged: its status, its gates, the facts behind them, and its figure against the
    baseline (``difference``: measured / baseline - 1, lower-is-better cases as their time).

    ``undecided``: the main gate stopped undecided at its budget (INCONCLUSIVE, or FAIL by a policy): such a
    case counts towards the never-deciding nights.  ``beyond``: where an undecided estimate lies on the failing
    side of its threshold, which side in words (``below``, ``above``), else None."""

    status: Status
    reasons: tuple[Reason, ...] = ()
    gates: tuple[Gate, ...] = ()
    difference: float | None = None
    undecided: bool = False
    beyond: str | None = None

    @classmethod
    def of(cls, status: Status, text: str, why: Why = Why.NOTE) -> Judgement:
        """A judgement of one line: a skip, an error, a remote case."""
        return cls(status, (Reason(text, why),))

    @property
    def failed(self) -> bool:
        return self.status in (Status.FAIL, Status.ERROR)

    def gate(self, name: GateName) -> Status | None:
        """The status of gate ``name``, or None where the case has no such gate."""
        return next((g.status for g in self.gates if g.name is name), None)

    @property
    def main_status(self) -> Status | None:
        """The main gate's own verdict (the results' ``throughput_verdict``): INCONCLUSIVE where it did not
        decide, whatever a policy made of the case; None without a gate."""
        if not self.gates:
            return None
        return Status.INCONCLUSIVE if self.undecided else self.gates[0].status

    def adding(self, *reasons: Reason) -> Judgement:
        """The same judgement with more facts."""
        return dataclasses.replace(self, reasons=self.reasons + tuple(reasons))

    def failing(self, reason: Reason, *, headline: bool = False) -> Judgement:
        """The judgement failed by a policy, ``reason`` saying why: as the first line where it leads
        (``reason.lead``), else the last.  ``headline``: the headline's word becomes FAIL too (an undecided
        case that a policy fails)."""
        reasons = tuple(dataclasses.replace(r, word=Status.FAIL) if headline and r.why is Why.HEADLINE and r.word
                        else r for r in self.reasons)
        reasons = (reason, *reasons) if reason.lead else (*reasons, reason)
        return dataclasses.replace(self, status=Status.FAIL, reasons=reasons)

    def to_dict(self) -> dict[str, Any]:
        return {"reasons": [r.to_dict() for r in self.reasons],
                "gates": {g.name.value: g.status.value for g in self.gates}}

    @classmethod
    def from_dict(cls, status: Status, data: Mapping[str, Any], difference: float | None = None,
                  undecided: bool = False) -> Judgement:
        return cls(status, tuple(Reason.from_dict(r) for r in data.get("reasons") or []),
                   tuple(Gate(GateName(k), Status(v)) for k, v in (data.get("gates") or {}).items()), difference,
                   undecided)
