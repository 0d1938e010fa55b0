"""A host that moved since its baseline was saved: judged both ways, decided only where both agree (issue 53).

A stored baseline compares tonight's runs with a save's.  Where the host itself became slower or faster since the
save (a VM moved to a busier host, a lower clock, a tenant that stays), every case reads the host's move as if the
code had made it: unchanged code fails, and on a faster host a slowdown passes.  A session cannot see such a move
in its own runs; the controller's probe can: between runs, after a run's process tree has ended, it starts a
process of its own that times the host's memory copy and core arithmetic (:mod:`pytest_dlperf.worker.hostprobe`).
Nothing of the code under test runs beside it, so the code cannot move it.  A baseline being saved keeps its runs'
readings (``host_runs``: one figure per run, :func:`pytest_dlperf.worker.hostprobe.index`).

The rule: where the session's readings differ from the save's by more than :data:`MOVED_SIGMAS` standard errors of
their difference (:data:`FASTER_SIGMAS` where they read faster: a faster host's scale only lowers the runs, so it can
withhold a pass, never make a FAIL; at 3, one run's reading missed a host 15% faster about one night in twelve,
``benchmarks/verdict_simulation.py --three-nights --host 1.15``), and by at least :data:`MOVED_FLOOR` of the
tolerance, the case is judged twice, as measured and on the host's scale (each run's figure divided by the host's
ratio).  It decides only where the two agree: both slower, or both not slower (a pass and an improvement agree, as
measured is said).  Where one is decided and the other not, more runs are measured; where they contradict (unchanged
code on a slower host: a FAIL as measured, a PASS on the host's scale), the case ends INCONCLUSIVE, saying that the
host moved and by how much.  A slowdown
beyond the host's move fails both ways, so the rule never excuses one: it only withholds a verdict the host's move
would have made.

Where the controller's probe does not say the host moved, the runs' own probes may (the memory and core probes the
worker times between windows, :func:`probes_faster`, by the same test), but only one way: faster.  They run beside
the case's own processes, whose work (its loaders, its helpers, its memory traffic) can lower them and so cannot be
an excuse; nothing the code does makes the host read faster.  A case whose runs' probes read faster than the
save's, beyond the noise of their means, is judged on their scale too (each run's figure divided by the smaller of
their ratios), so that a slowdown a faster host hides does not pass (on a host whose speed flips within seconds, 5 of
20 sessions twice the tolerance slower passed, their probes 27-82% faster than the save's: 0 of 20 with this rule,
benchmarks/results/2026-11-29-issue-53-xeon-save-and-faster-probes.md).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence

from . import evidence as ev
from . import figures as fig
from .figures import RunFigure

#: Standard errors of the difference of the two sides' mean log readings beyond which the host has moved.
MOVED_SIGMAS = 3.0
#: A faster move that counts, in standard errors (the runs' own probes', and the controller's where faster): lower, as
#: it only withholds a pass (a run more, or INCONCLUSIVE), never makes a FAIL.  On the Xeon VM, whose host flips
#: between two speeds within seconds, a save's core probes spread about 20% between its runs, and sessions twice the
#: tolerance slower passed with their probes 27% faster than the save's median: beyond 2 standard errors of the
#: means, not always 3.
FASTER_SIGMAS = 2.0
#: The least move that counts, as a share of the tolerance: a smaller one cannot turn a verdict.
MOVED_FLOOR = 0.5
#: The spread assumed for the readings where neither side has two: the probes' CV on the project's VMs is 2-4%.
PRIOR_SPREAD = 0.04

NOT_SLOWER = (ev.Decision.PASS, ev.Decision.IMPROVED)


@dataclasses.dataclass(frozen=True)
class Move:
    """The host's move: the session's readings over the save's (``ratio``), and how many of each."""

    ratio: float
    runs: int
    saved_runs: int
    by: str = "its own probe (a process of its own between runs) reads"  # what read it, and the verb

    def line(self) -> str:
        way = "slower" if self.ratio < 1 else "faster"
        return (f"the host moved: {self.by} {abs(self.ratio - 1):.0%} {way} than when the baseline was saved "
                f"({self.runs} against {self.saved_runs} readings)")


def moved(figures: Sequence[RunFigure], saved: Sequence[float] | None, tolerance: float) -> Move | None:
    """The host's move since the save, where it is beyond the readings' own noise; None where it is not, or where
    either side has no reading."""
    now = [math.log(f.host) for f in figures if f.host and not f.busy and not f.far]
    then = [math.log(v) for v in saved or () if v > 0]
    shift = _shift(now, then, tolerance, faster_sigmas=FASTER_SIGMAS)  # faster only withholds a pass: a lower bar
    return None if shift is None else Move(math.exp(shift), len(now), len(then))


def probes_faster(figures: Sequence[RunFigure], references: Mapping[str, float | None],
                  readings: Mapping[str, Sequence[float]] | None, drops: Mapping[str, float | None] | None,
                  tolerance: float) -> Move | None:
    """The host's move as the runs' own probes read it (memory bandwidth, core speed), where it is faster: each
    probe's counted runs against the save's readings of it (``readings``, else its figure in ``references``), by
    the test of :func:`moved` at :data:`FASTER_SIGMAS`; the smaller ratio of those that moved.  None where none
    moved, or one moved slower (the code's own work can lower them), or for a probe whose drop is None (a GPU
    case's: ``drops``)."""
    counted = [f for f in figures if not f.busy and not f.far]
    shifts, sides = [], []
    for probe in fig.HOST_PROBES:
        if fig.drop_of(probe, drops) is None:
            continue
        now = [math.log(v) for f in counted if (v := f.probe(probe))]
        saved = [v for v in (readings or {}).get(probe.key) or () if v] or [references.get(probe.key) or 0.0]
        then = [math.log(v) for v in saved if v > 0]
        shift = _shift(now, then, tolerance, FASTER_SIGMAS)
        if shift is not None:
            shifts.append(shift)
            sides.append((len(now), len(then)))
    if not shifts or min(shifts) <= 0:
        return None
    runs, saved_runs = sides[shifts.index(min(shifts))]
    return Move(math.exp(min(shifts)), runs, saved_runs,
                by="the runs' own probes of its memory and cores (timed between windows) read")


def _shift(now: Sequence[float], then: Sequence[float], tolerance: float,
           sigmas: float = MOVED_SIGMAS, faster_sigmas: float | None = None) -> float | None:
    """The difference of the two sides' mean log readings, where it is beyond ``sigmas`` standard errors
    (their pooled spread; :data:`PRIOR_SPREAD` where neither side has two) and :data:`MOVED_FLOOR` of the
    tolerance; None where it is not, or either side is empty."""
    if not now or not then:
        return None
    difference = statistics.fmean(now) - statistics.fmean(then)
    deviations = [v - statistics.fmean(side) for side in (now, then) if len(side) > 1 for v in side]
    dof = len(deviations) - sum(len(side) > 1 for side in (now, then))
    spread = math.sqrt(sum(d * d for d in deviations) / dof) if dof > 0 else PRIOR_SPREAD
    se = spread * math.sqrt(1 / len(now) + 1 / len(then))
    bar = faster_sigmas if faster_sigmas is not None and difference > 0 else sigmas
    return None if abs(difference) <= max(bar * se, MOVED_FLOOR * tolerance) else difference


def combined(raw: ev.Decision, scaled: ev.Decision) -> tuple[ev.Decision, bool]:
    """The decision of a case judged as measured (``raw``) and on the host's scale: (the decision, whether the two
    contradict each other).  Agreeing decisions are the raw one; one undecided leaves the case undecided."""
    if raw is ev.Decision.UNDECIDED or scaled is ev.Decision.UNDECIDED:
        return ev.Decision.UNDECIDED, False
    if (raw in NOT_SLOWER) == (scaled in NOT_SLOWER):
        return raw, False
    return ev.Decision.UNDECIDED, True
