"""Where a case's step time went: its phases against its baseline's, the line a FAIL or IMPROVED message adds.

The worker times each step of a window in phases (:mod:`pytest_dlperf.worker.phases`: waiting for data, forward,
backward, the exposed all-reduce on several ranks, the optimizer; ``other`` the rest).  A case keeps the median of
each phase over its counted runs' windows, in seconds per step (:func:`of_runs`); a saved baseline entry keeps its
own.  :func:`compare` says which phase moved most in seconds per step (a slowdown is time added somewhere) and how
far the others moved: "backward +31% (+4.1 ms a step); the others within 0.2 ms a step".  Against a baseline
without phases (an older file, a published figure), or one that timed other phases, it says nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..worker.phases import OTHER, pooled

#: The key of a case's phases that holds its step time (seconds per step); the others are the phases'.
STEP = "step"
#: A phase whose baseline time is under this share of its step has no meaningful relative change: the line gives its
#: time only ("data +3.1 ms a step, from 0.0 ms").
SMALL = 0.05


def of_runs(runs: Iterable[Any], counted: set[int] | None = None) -> dict[str, float] | None:
    """The case's phases from its runs (:class:`~pytest_dlperf.results.runs.RunRecord`; ``counted``: the indices
    of the runs that count, None: all): each phase's median seconds per step over their windows, ``other`` and
    the median step time (:data:`STEP`).  Where no counted window has phases, the runs cut short far off give
    theirs (the steps each timed before its cut, :class:`~pytest_dlperf.gate.far.Cut`); None where none has."""
    runs = list(runs)
    found = pooled([w for run in runs if counted is None or run.index in counted for w in run.windows])
    if found is None:
        found = pooled([run.far_off["window"] for run in runs if run.far_off and run.far_off.get("window")])
    if found is None:
        return None
    return {STEP: found.step_seconds, **found.seconds()}


@dataclasses.dataclass(frozen=True)
class Shift:
    """The phase that moved most between a baseline's step and a case's, and the largest move of the others."""

    phase: str
    before: float  # seconds per step
    after: float
    step: float  # the baseline's step time
    others: float  # the largest move of another phase, seconds per step (absolute)
    #: Every phase of a tenth of the step or more moved alike (within half the step's own change): a slower machine,
    #: clock or common cause, not one place; the step's relative change.
    alike: float | None = None

    @property
    def change(self) -> float:
        return self.after - self.before

    def line(self) -> str:
        """``where the time went: backward +31% (+4.1 ms a step); the others within 0.2 ms a step``."""
        if self.alike is not None:
            return (f"where the time went: every phase alike, {self.alike:+.0%} (a slower machine, clock or common "
                    "cause: no one place)")
        name = "outside the timed phases" if self.phase == OTHER else self.phase
        ms = f"{self.change * 1e3:+,.1f} ms a step"
        if self.before >= SMALL * self.step:
            moved = f"{name} {self.change / self.before:+.0%} ({ms})"
        else:
            moved = f"{name} {ms}, from {self.before * 1e3:,.1f} ms"
        return f"where the time went: {moved}; the others within {self.others * 1e3:,.1f} ms a step"


def compare(now: Mapping[str, float] | None, then: Mapping[str, float] | None) -> Shift | None:
    """The :class:`Shift` from ``then`` (a baseline's phases) to ``now`` (the case's), both as :func:`of_runs`
    gives them; None where either has none or they time different phases (one rank against several)."""
    if not now or not then or set(now) != set(then) or not then.get(STEP):
        return None
    moves = {name: now[name] - then[name] for name in now if name != STEP}
    if not moves:
        return None
    phase = max(moves, key=lambda name: abs(moves[name]))
    others = max((abs(v) for name, v in moves.items() if name != phase), default=0.0)
    return Shift(phase, then[phase], now[phase], then[STEP], others, alike(now, then))


def alike(now: Mapping[str, float], then: Mapping[str, float]) -> float | None:
    """The step's relative change where every phase of :data:`ALIKE_SHARE` of the step or more changed by it, within
    :data:`ALIKE_SPREAD` of it (and it is 5% or more); else None."""
    overall = now[STEP] / then[STEP] - 1
    big = [name for name in then if name != STEP and then[name] >= ALIKE_SHARE * then[STEP]]
    if abs(overall) < 0.05 or len(big) < 2:
        return None
    spread = ALIKE_SPREAD * abs(overall)
    return overall if all(abs(now[name] / then[name] - 1 - overall) <= spread for name in big) else None


#: :func:`alike`: the phases it compares (this share of the step or more), and how far from the step's own change
#: each may be (this share of it) for the line to say the whole step slowed, not one place.
ALIKE_SHARE = 0.10
ALIKE_SPREAD = 0.5
#: The phases of a step's computation (the rest: waiting for data, the exposed all-reduce, the loop).
COMPUTE = ("forward", "backward", "optimizer")


def scaling_parts(ranks: int, many: Mapping[str, float] | None, one: Mapping[str, float] | None) -> str | None:
    """A multi-rank case's scaling loss in parts: its step on ``ranks`` ranks against the 1-rank reference's
    (``many``, ``one``: phases as :func:`of_runs` gives them), split into the computation (a straggler, a slower
    kernel), the exposed all-reduce (the network, NCCL) and the rest; None without phases on both sides or
    without the all-reduce's."""
    if not many or not one or many.get("comm") is None or not one.get(STEP) or not all(
            name in many and name in one for name in COMPUTE):
        return None
    compute = sum(many[n] for n in COMPUTE) - sum(one[n] for n in COMPUTE)
    rest = many[STEP] - one[STEP] - compute - many["comm"]
    return (f"scaling in parts: a step on {ranks} ranks {many[STEP] * 1e3:,.1f} ms against {one[STEP] * 1e3:,.1f} ms "
            f"on 1: computation {compute * 1e3:+,.1f} ms, exposed all-reduce {many['comm'] * 1e3:,.1f} ms, "
            f"the rest {rest * 1e3:+,.1f} ms")


def of_ranks(runs: Iterable[Any], counted: set[int] | None = None) -> dict[int, dict[str, float]]:
    """Each rank's phases (as :func:`of_runs` gives a case's), from the windows the counted runs kept per rank
    (``RunRecord.ranks``): {} for a run of one rank, or where no rank's windows have phases."""
    windows: dict[int, list] = {}
    for run in runs:
        if counted is None or run.index in counted:
            for rank in run.ranks:
                windows.setdefault(rank.rank, []).extend(rank.windows)
    out = {}
    for rank, kept in sorted(windows.items()):
        found = pooled(kept)
        if found is not None:
            out[rank] = {STEP: found.step_seconds, **found.seconds()}
    return out


#: :func:`rank_parts`: a rank whose computation takes this share of a step more than the fastest rank's, and which
#: waits least in the all-reduce, is a straggler.
STRAGGLER_SHARE = 0.10


def rank_parts(per_rank: Mapping[int, Mapping[str, float]]) -> str | None:
    """Per rank, its computation and its exposed all-reduce (ms a step), and what they say: a straggler (one rank
    computes longer, the others wait for it in the all-reduce) or ranks that compute alike (a slower all-reduce is
    the network's or the collective's); None for fewer than two ranks with those phases."""
    usable = {r: p for r, p in per_rank.items() if p.get("comm") is not None and all(n in p for n in COMPUTE)}
    if len(usable) < 2:
        return None
    compute = {r: sum(p[n] for n in COMPUTE) for r, p in usable.items()}
    comm = {r: p["comm"] for r, p in usable.items()}
    each = ", ".join(f"rank {r} {compute[r] * 1e3:,.1f} + {comm[r] * 1e3:,.1f}" for r in sorted(usable))
    slow, fastest = max(compute, key=compute.get), min(compute.values())
    step = max(p[STEP] for p in usable.values())
    if compute[slow] - fastest > STRAGGLER_SHARE * step and comm[slow] < min(c for r, c in comm.items() if r != slow):
        reading = (f"rank {slow} is a straggler: it computes {(compute[slow] - fastest) * 1e3:,.1f} ms a step longer "
                   f"than the fastest, and the others wait for it in the all-reduce")
    else:
        reading = "the ranks compute alike: what the all-reduce exposes is the collective's own time"
    return f"per rank, computation + exposed all-reduce (ms a step): {each}: {reading}"
