"""The tolerance a saved baseline's measured noise supports.

``--dlperf-save-baseline`` (and the baseline a session records for a machine that had none)
writes each case with the tolerance asked for, or wider where the case's own measured spread
would make that gate fail by chance (:func:`noise_tolerance`).  Each widened case says so in
one line (:meth:`Widened.line`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import Any

# A saved tolerance is at least NOISE_SIGMAS x the measured spread (a CV), rounded up to a whole
# percent.  The gate fails a case whose median falls below baseline x (1 - tolerance): at 3
# standard deviations a case that did not change fails by chance about once in 700 sessions
# (one-sided normal tail, 0.13%), some 2% for a suite of a dozen cases.  The saved figure is
# itself one draw, so the ratio spreads sqrt(2) wider than one median; but the spread used is
# that of single windows (or single runs' medians), which exceeds that of the median of
# several by about sqrt(n) / 1.25 (1.8 for 5 windows): 3 stays on the safe side of both.  The
# windows of one run do not see the drift between runs (fresh processes, busy neighbours), which
# is often larger: with 3 runs or more the runs' medians are what is measured.
NOISE_SIGMAS = 3
#: A saved tolerance this wide or wider is flagged: the case can only catch gross slowdowns.
NOISY_TOLERANCE = 0.5
#: The widest tolerance a saved baseline gets (the schema takes less than 1): it still fails a
#: case that became 10x slower, or crashes.
MAX_SAVED_TOLERANCE = 0.9


@dataclasses.dataclass(frozen=True)
class Spread:
    """How much a measured case varied: the CV of its runs' medians (3 runs or more), else of its windows."""

    cv: float
    over: str  # "windows" or "runs"
    count: int  # how many windows or runs

    def describe(self) -> str:
        what = "windows" if self.over == "windows" else f"the medians of its {self.count} runs"
        return f"{what} varied {round(100 * self.cv)}% (CV)"


def measured_spread(record: Mapping[str, Any]) -> Spread | None:
    """The spread of a results record (``--dlperf-json``'s case): its last attempt's runs and windows.

    With 3 runs or more, the CV of the runs' medians: every run is a fresh process, so this is
    the spread between sessions that the gate meets.  Runs the evidence marks busy are left out.  Else the CV of the windows (of both runs
    for 2: two medians give no usable standard deviation).  None when nothing tells.
    """
    attempts = record.get("attempts") or []
    # Runs measured on a busy machine (the verdict's evidence says which) are not the case's noise.
    busy = {r.get("index") for r in ((record.get("evidence") or {}).get("runs") or []) if r.get("busy")}
    runs = [run for run in (attempts[-1].get("runs") or [] if attempts else [])
            if run.get("windows") and run.get("index") not in busy]
    medians = [statistics.median(w["throughput"] for w in run["windows"]) for run in runs]
    if len(medians) >= 3:
        return Spread(statistics.stdev(medians) / statistics.fmean(medians), "runs", len(medians))
    windows = [w["throughput"] for run in runs for w in run["windows"]]
    if len(windows) >= 2:
        return Spread(statistics.stdev(windows) / statistics.fmean(windows), "windows", len(windows))
    stats = record.get("stats") or {}
    if stats.get("n", 0) >= 2 and stats.get("cv") is not None:
        return Spread(float(stats["cv"]), "windows", int(stats["n"]))
    return None


@dataclasses.dataclass(frozen=True)
class Widened:
    """A saved case whose tolerance its measured noise widened beyond the one asked for."""

    case_id: str
    spread: Spread
    requested: float
    needed: float  # NOISE_SIGMAS x the spread
    tolerance: float  # what was saved

    @property
    def noisy(self) -> bool:
        return self.tolerance >= NOISY_TOLERANCE

    def line(self) -> str:
        def pct(fraction: float) -> str:
            return f"{round(100 * fraction)}%"

        if self.tolerance < self.needed:
            how = f"tolerance {pct(self.tolerance)}, the widest a baseline takes ({NOISE_SIGMAS} x CV is {pct(self.needed)})"
        else:
            how = f"tolerance {pct(self.tolerance)} ({NOISE_SIGMAS} x CV)"
        text = (f"{self.case_id}: {self.spread.describe()}; saved with {how}, not {pct(self.requested)}, which "
                "this noise would fail by chance")
        if self.noisy:
            text += (f"; too noisy to catch a slowdown under {pct(self.tolerance)}: measure it on a quieter "
                     "machine or with more --dlperf-runs")
        return text


def noise_tolerance(case_id: str, record: Mapping[str, Any], requested: float) -> tuple[float, Widened | None]:
    """The tolerance to save for a measured case: ``requested``, or wider where its spread needs it."""
    spread = measured_spread(record)
    if spread is None:
        return requested, None
    needed = NOISE_SIGMAS * spread.cv
    if needed <= requested:
        return requested, None
    # Rounded up to a whole percent (less a hair, so that 0.12 stays 12%).
    tolerance = min(math.ceil(needed * 100 - 1e-9) / 100, MAX_SAVED_TOLERANCE)
    if tolerance <= requested:
        return requested, None
    return tolerance, Widened(case_id, spread, requested, needed, tolerance)


def summary_line(count: int, widened: list[Widened], tolerance: float, runs: int) -> str:
    """One line: how many saved cases the measured noise gave a wider tolerance than asked for."""
    noisy = sum(w.noisy for w in widened)
    text = (f"{len(widened)} of {count} saved case(s) got a tolerance wider than the {round(100 * tolerance)}% "
            "asked for: their measured noise needs it")
    if noisy:
        text += f" ({noisy} of them too noisy to catch a slowdown under {round(100 * NOISY_TOLERANCE)}%)"
    if runs < 3:
        text += "; --dlperf-runs 3 would also measure the noise between runs, often larger"
    return text
