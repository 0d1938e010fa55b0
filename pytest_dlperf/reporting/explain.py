"""Where a step's time went: ``dlperf explain NEW OLD`` (the operators whose time per step changed most between
two profiles of a case) and the report's sections on phases and operators.

A case profiled with ``--dlperf-profile`` keeps the table of its top operators (:mod:`pytest_dlperf.worker.operators`)
in the results file, and a baseline saved with it keeps the table in the case's entry.  For each case that has a
table in NEW (a results file) and in OLD (a results file or a baseline file), the operators are listed by how much
their self time per step grew, the largest growth first: an operator made slower comes first, and one made faster
comes last.  An operator missing from one side's table (beyond its top 40) counts as 0 there and is marked.

The same comparison names the top operators on a FAIL or an IMPROVED against a baseline saved with a profile
(:func:`headline`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import jsonio
from ..results.case import CaseResult
from ..worker.operators import TOP, Profile
from ..worker.phases import OTHER
from .markdown_tables import escape, table
from .summary import render_table

#: Operators listed per case unless ``--top`` says.
SHOWN = 10


@dataclasses.dataclass(frozen=True)
class Change:
    """One operator's self time per step (ms) and calls per step on both sides (None: not in that side's table)."""

    name: str
    new_ms: float | None
    old_ms: float | None
    new_calls: float | None
    old_calls: float | None

    @property
    def delta_ms(self) -> float:
        return (self.new_ms or 0.0) - (self.old_ms or 0.0)

    def cells(self) -> list[str]:
        change = f"{self.delta_ms:+.3f}"
        if not self.old_ms or not self.new_ms:
            ratio = "new" if self.new_ms else "gone" if self.old_ms else ""
        elif self.new_ms / self.old_ms >= 10:
            ratio = f"x{self.new_ms / self.old_ms:.0f}"
        else:
            ratio = f"{self.delta_ms / self.old_ms:+.0%}"
        return [self.name, _ms(self.old_ms), _ms(self.new_ms), change, ratio,
                f"{_calls(self.old_calls)} -> {_calls(self.new_calls)}"]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _calls(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def changes(new: Profile, old: Profile) -> list[Change]:
    """Every operator of either table, the largest growth of its self time per step first."""
    mine, theirs = new.by_name(), old.by_name()
    found = [Change(name, getattr(mine.get(name), "self_ms", None), getattr(theirs.get(name), "self_ms", None),
                    getattr(mine.get(name), "calls", None), getattr(theirs.get(name), "calls", None))
             for name in {**theirs, **mine}]
    return sorted(found, key=lambda c: (-c.delta_ms, c.name))


def comparable(new: Profile, old: Profile) -> str | None:
    """Why two profiles cannot be compared (one timed on a GPU, the other on a CPU), or None."""
    if new.clock != old.clock:
        return f"one was profiled on the {new.clock.upper()}, the other on the {old.clock.upper()}"
    return None


def headline(new: Profile, old: Profile, slower: bool = True, shown: int = 2) -> str | None:
    """One line for a FAIL (``slower``) or an IMPROVED message: the operators that grew (or shrank) most, with the
    profiled step's time on both sides; None where they cannot be compared."""
    if comparable(new, old) is not None:
        return None
    found = changes(new, old)
    moved = (found if slower else found[::-1])[:shown]
    parts = ", ".join(f"{c.name} {c.delta_ms:+.2f} ms a step ({_ms(c.old_ms)} -> {_ms(c.new_ms)})" for c in moved)
    return (f"operators that changed most (profiled steps {old.step_ms:.1f} -> {new.step_ms:.1f} ms): {parts}; "
            "dlperf explain lists them all")


def case_lines(case_id: str, new: Profile, old: Profile, top: int = SHOWN) -> list[str]:
    """The lines of one case: its profiled step on both sides, then its ``top`` operators as a table."""
    why = comparable(new, old)
    if why is not None:
        return [f"{case_id}: not compared: {why}"]
    head = (f"{case_id}: profiled step {old.step_ms:.3f} -> {new.step_ms:.3f} ms ({new.clock} clock, self time of "
            f"operators {old.total_ms:.3f} -> {new.total_ms:.3f} ms a step)")
    rows = [change.cells() for change in changes(new, old)[:top]]
    lines = render_table(["operator", "old ms", "new ms", "change ms", "change", "calls a step"], rows,
                         align_right=range(1, 6))
    return [head, *("  " + line for line in lines)]


def profiles(path: str) -> dict[str, Profile]:
    """The profiles of a results file's cases or a baseline file's entries, by case id."""
    if _kind(path) == "dlperf-results":
        document = jsonio.load(path, "results")
        return {case["id"]: Profile.from_dict(case["profile"]) for case in document["cases"] if case.get("profile")}
    from ..baseline.document import load

    return {entry.case.id: Profile.from_dict(entry.profile) for entry in load(path).entries if entry.profile}


def _kind(path: str) -> Any:
    """A document's ``kind`` before it is validated, so that the right schema names its problems."""
    try:
        document = jsonio.parse(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, jsonio.DocumentError):
        return None  # the load that follows names the problem
    return document.get("kind") if isinstance(document, Mapping) else None


def explain(new_path: str, old_path: str, top: int = SHOWN, case: str | None = None) -> tuple[list[str], int]:
    """The lines of ``dlperf explain`` and how many cases were compared."""
    new, old = profiles(new_path), profiles(old_path)
    lines: list[str] = []
    both = [case_id for case_id in new if case_id in old and (case is None or case_id == case)]
    for case_id in both:
        lines += [*case_lines(case_id, new[case_id], old[case_id], top), ""]
    missing = [case_id for case_id in new if case_id not in old and (case is None or case_id == case)]
    if missing:
        lines.append(f"no profile in {old_path} for: {', '.join(missing)}")
    if not new:
        lines.append(f"no case of {new_path} was profiled: run it with --dlperf-profile on")
    return lines, len(both)


#: The report's phase columns, in the order a step runs them (pytest_dlperf.worker.phases), then the whole step.
PHASE_COLUMNS = ("data", "compute", "forward", "backward", "comm", "optimizer", "other", "step")


def phases_section(results: Sequence[CaseResult]) -> list[str]:
    """The report's "Where the time went": each case's milliseconds a step per phase, and the change against its
    baseline's phases where the baseline has them (a phase both timed; ``other`` where both timed the same)."""
    timed = [r for r in results if r.phases]
    if not timed:
        return []
    columns = [name for name in PHASE_COLUMNS if any(name in r.phases for r in timed)]
    rows = []
    for result in timed:
        then = phases_against(result.phases, result.baseline.phases if result.baseline is not None else None)
        rows.append([result.id, *(_phase_cell(result.phases.get(name), then.get(name)) for name in columns)])
    lines = ["## Where the time went", "", "Milliseconds a step of each phase (medians over the counted runs' "
             "windows), and the change against the baseline's where it has them.", ""]
    return lines + table(["case", *columns], rows, align_right=range(1, len(columns) + 1)) + [""]


def phases_against(now: Mapping[str, float], then: Mapping[str, float] | None) -> Mapping[str, float]:
    """The baseline's phases a case's may be set against: all of them where both timed the same phases, else those
    both timed and the step (``other`` holds different phases on each side)."""
    if not then or set(then) == set(now):
        return then or {}
    return {name: value for name, value in then.items() if name in now and name != OTHER}


def _phase_cell(seconds: float | None, then: float | None) -> str:
    if seconds is None:
        return "-"
    if not then:
        return f"{seconds * 1000:.2f}"
    return f"{seconds * 1000:.2f} ({seconds / then - 1:+.0%})"


def markdown_section(results: Sequence[CaseResult], top: int = SHOWN) -> list[str]:
    """The report's "Top operators": each profiled case's largest self times a step (``--dlperf-profile``)."""
    profiled = [r for r in results if r.profile is not None]
    if not profiled:
        return []
    lines = ["## Top operators", "", "One run of each case under torch.profiler, beside the counted runs "
             "(`--dlperf-profile`): self time a step, the largest first; `dlperf explain` compares two.", ""]
    for result in profiled:
        profile = result.profile
        trace = f"; trace `{profile.trace}`" if profile.trace else ""
        lines += [f"**{escape(result.id)}**: profiled step {profile.step_ms:.3f} ms ({profile.clock} clock){trace}",
                  ""]
        rows = [(op.name, f"{op.self_ms:.3f}", f"{op.self_ms / profile.total_ms:.0%}" if profile.total_ms else "-",
                 f"{op.calls:g}") for op in profile.operators[:top]]
        lines += table(["operator", "ms a step", "share", "calls a step"], rows, align_right=range(1, 4)) + [""]
    return lines


def add_parser(commands) -> None:
    """``dlperf explain``, for :mod:`pytest_dlperf.cli`."""
    parser = commands.add_parser(
        "explain", help="the operators whose time per step changed most between two profiled runs",
        description="For each case profiled (--dlperf-profile) in both NEW and OLD, list the operators by how much "
                    "their self time per step grew, the largest growth first, from torch.profiler's tables. Exit "
                    "status 1 where no case has a profile on both sides.")
    parser.add_argument("new", metavar="NEW", help="the results of the run to explain (--dlperf-json)")
    parser.add_argument("old", metavar="OLD", help="the results or the baseline it is compared with (saved with "
                                                   "--dlperf-profile)")
    parser.add_argument("--top", type=int, default=SHOWN, help=f"operators listed per case (default {SHOWN}, "
                                                              f"at most {TOP})")
    parser.add_argument("--case", metavar="ID", help="only this case")
    parser.set_defaults(func=run)


def run(args) -> int:
    lines, compared = explain(args.new, args.old, max(1, args.top), args.case)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if compared else 1
