"""Far off: a run whose steps go far slower than its baseline allows is cut short, and two such runs fail the case.

A case made ten times slower would otherwise take ten times its usual run to fail, and a nightly job whose code
became very slow overruns its CI job's limit and reports nothing.  So while a run of a case judged against a
baseline goes on, the controller watches its steps (the worker's ``progress.json``:
:class:`~pytest_dlperf.protocol.Progress`) and cuts it short once it cannot be near the baseline.

The rule, stated:

* The **floor** is :data:`FAR_RATIO` (a half) of the threshold: ``floor = 0.5 x baseline x (1 - tolerance)``.
  A run below it is at least twice as slow as the slowest figure that passes: no plausible noise of a quiet
  machine (runs of a case vary 1-10% here) reaches that far.
* The **pace** of a run so far is the steps it trained since its first step (the first, with its compilation and
  autotuning, is left out) over the seconds between the worker's reports of them.  The worker writes its progress
  right after a step (about once a second in the warm-up, after each window), so the pace is measured, never
  guessed from steps that may or may not have happened since.
* A run is **far off** once its pace is under the floor over at least :data:`MIN_STEPS` steps, :data:`MIN_SPAN`
  seconds and :data:`SPAN_STEPS` steps' time at the floor's pace, while the machine was quiet: other processes (any
  not descending from the run's own) used at most the busy threshold of CPU, the CPUs waited little on disks, and on
  a GPU no other process was listed on it (:mod:`pytest_dlperf.launch.pace` measures; where it cannot tell, it does
  not cut, and with ``dlperf_max_interference = off`` no run is cut: a slow run may then be the machine's).
* A cut run is no evidence for the estimate.  :data:`FAR_RUNS` far-off runs in a row fail the case (one, where the
  run budget allows no more), saying what the runs reached and when they were cut.  A far-off run followed by a run
  near the baseline (a stall of the first run's own) leaves the case to its other runs, as a busy run would.

A run's first seconds are left out of nothing else: a case whose whole run takes about :data:`MIN_SPAN` seconds
ends before it could be cut, and is judged from its runs as ever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: The floor's share of the threshold: a run under it is at least twice as slow as the slowest pass.
FAR_RATIO = 0.5
#: The least seconds of steps (after the first) before a run can be cut.
MIN_SPAN = 2.0
#: And the least steps: a short run (a test's dozen steps) slowed by the machine's load is never cut on a few.
MIN_STEPS = 8
#: And the least steps' worth of time at the floor's pace, for a case whose steps take long.
SPAN_STEPS = 4
#: Far-off runs in a row that fail a case.
FAR_RUNS = 2
#: The most time the CPUs may have waited on disks (percent of one CPU) for a run to be cut: a cold cache is the
#: machine's, not the code's.
MAX_IOWAIT = 50.0


@dataclasses.dataclass(frozen=True)
class FarRule:
    """What a run of a case is cut against: its floor (samples per second) and the most CPU other processes may
    have used meanwhile (percent of one CPU, ``dlperf_max_interference``: with it off no rule is made)."""

    floor: float
    max_other_cpu: float


def floor(expected: float, tolerance: float) -> float:
    """The pace under which a run of a case whose baseline is ``expected`` at ``tolerance`` is far off."""
    return FAR_RATIO * (1.0 - tolerance) * expected


def rule(expected: float, tolerance: float, max_other_cpu: float) -> FarRule:
    """The rule of a case whose baseline is ``expected`` at ``tolerance``."""
    return FarRule(floor(expected, tolerance), max_other_cpu)


def pace(steps: int, samples_per_step: float, seconds: float) -> float:
    """A run's samples per second over ``steps`` steps that took ``seconds``."""
    return steps * samples_per_step / seconds


def long_enough(far: FarRule, samples_per_step: float, steps: int, seconds: float) -> bool:
    """Whether ``steps`` steps in ``seconds`` are enough to cut on: :data:`MIN_STEPS`, :data:`MIN_SPAN`, and
    :data:`SPAN_STEPS` steps' time at the floor's pace."""
    return steps >= MIN_STEPS and seconds >= max(MIN_SPAN, SPAN_STEPS * samples_per_step / far.floor)


@dataclasses.dataclass(frozen=True)
class Cut:
    """A run cut short: its pace, its steps and seconds since its first step, its floor, what else used the
    machine meanwhile (percent of one CPU), and the phases of its steps until then as one window (``steps``,
    ``seconds``, ``phases``: the progress file's ``phase_window``), where the worker timed them."""

    pace: float
    steps: int
    seconds: float
    floor: float
    other_cpu_percent: float | None = None
    window: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.window is None:
            del out["window"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cut:
        return cls(data["pace"], data["steps"], data["seconds"], data["floor"], data.get("other_cpu_percent"),
                   data.get("window"))

    def line(self, unit: str) -> str:
        return (f"{self.steps} step(s) in {self.seconds:.1f} s after its first: {self.pace:,.1f} {unit}, under "
                f"{self.floor:,.1f}")


def far_streak(far: list[bool]) -> int:
    """The far-off runs at the end of a case's runs (``far``: each run's, in order)."""
    streak = 0
    for one in reversed(far):
        if not one:
            break
        streak += 1
    return streak
