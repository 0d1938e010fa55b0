"""A case's top operators, from one profiled run beside its timed ones (``--dlperf-profile``, issue 49).

A profiled run trains as a timed run does (the same model, data, warm-up), then runs :data:`STEPS` steps under
``torch.profiler`` (:mod:`.profiling`) and writes the table below into its result (``profile``): per operator, its
self time per step (the time inside the operator and not inside an operator it called; on a GPU the device's time,
on a CPU the host's) and its calls per step.  The run's Chrome trace is kept in its folder.  Its figures are never
counted: profiling slows a step.

This module is the document's side: plain Python, no torch, read by the controller and by ``dlperf explain``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: Steps profiled (after one the profiler warms up on): enough for a table whose noise is well below a real change,
#: few enough that a GPU's trace stays tens of megabytes.
STEPS = 10
#: Operators kept in the table, the largest self time first.
TOP = 40


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator's self time per step, in milliseconds, and its calls per step."""

    name: str
    self_ms: float
    calls: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "self_ms": round(self.self_ms, 6), "calls": round(self.calls, 3)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Operator:
        return cls(str(data["name"]), float(data["self_ms"]), float(data["calls"]))


@dataclasses.dataclass(frozen=True)
class Profile:
    """The table of one profiled run: which clock (``cpu`` or ``cuda``), the steps profiled, the step's time as the
    profiled steps took it (profiling included), the self time of all operators per step, the top operators, and
    the Chrome trace's path (None where it was not written)."""

    clock: str
    steps: int
    step_ms: float
    total_ms: float
    operators: tuple[Operator, ...]
    trace: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"clock": self.clock, "steps": self.steps, "step_ms": round(self.step_ms, 6),
                "total_ms": round(self.total_ms, 6), "operators": [op.to_dict() for op in self.operators],
                "trace": self.trace}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        return cls(str(data["clock"]), int(data["steps"]), float(data["step_ms"]), float(data["total_ms"]),
                   tuple(Operator.from_dict(op) for op in data.get("operators") or ()), data.get("trace"))

    def by_name(self) -> dict[str, Operator]:
        return {op.name: op for op in self.operators}


def table(events: list[tuple[str, float, int]], steps: int, clock: str, step_seconds: float,
          trace: str | None = None, top: int = TOP) -> Profile:
    """The profile of ``steps`` profiled steps from the profiler's averages: ``events`` as (name, self time in
    microseconds over all steps, calls over all steps); operators with no self time are left out."""
    merged: dict[str, tuple[float, int]] = {}
    for name, self_us, calls in events:  # one name may come more than once (the profiler's step records)
        us, count = merged.get(name, (0.0, 0))
        merged[name] = (us + self_us, count + calls)
    per_step = [Operator(name, round(us / 1000.0 / steps, 6), round(count / steps, 3))
                for name, (us, count) in merged.items() if us > 0]  # rounded as written: a table reads back equal
    per_step.sort(key=lambda op: (-op.self_ms, op.name))
    total = round(sum(op.self_ms for op in per_step), 6)
    return Profile(clock, steps, round(step_seconds * 1000.0, 6), total, tuple(per_step[:top]), trace)
