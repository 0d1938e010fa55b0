"""Coverage is part of the verdict: a session that gates measures every case it selects, or fails saying which not.

A session *gates* when it judges against something: a baseline file or folder (``--dlperf-baseline``), the history
(``--dlperf-baseline-from-history``) or a reference environment (``--dlperf-against``).  In such a session a case
that cannot be measured here (fewer GPUs visible than it needs, no CUDA for a GPU baseline, a command from a file
not trusted, a launcher or a requirement not installed) would be a skip, and a night of skips exits 0: a lost
GPU would be a green night.  So, once pytest has selected the cases (``-m``, ``-k``), before any of them runs,
:func:`gaps` lists those that cannot be measured and the session stops, naming each and why
(``--dlperf-allow-missing`` skips them instead, and the summary's first line says how many).  A case the session's
mode leaves out on purpose (a convergence case in an A/B session, a synthetic one under ``--dlperf-data-only``) is
no gap.

At the end, a session that gates and judged no case against anything (every case skipped, or a baseline folder
with no file for this machine, whose cases were recorded as its baseline instead) says so in the summary's first
line, and under CI (the ``CI`` variable set, as GitHub Actions, GitLab CI and most others set it) fails unless
``--dlperf-allow-missing`` says this is expected (:func:`judged_nothing`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence

from ..cases import Case
from ..results.case import CaseResult, Status

#: The verdicts of a case judged against something.
JUDGED = (Status.PASS, Status.FAIL, Status.IMPROVED, Status.INCONCLUSIVE)


@dataclasses.dataclass(frozen=True)
class Gap:
    """A selected case that cannot be measured here, and why."""

    case_id: str
    why: str


def gates(options, baseline) -> bool:
    """Whether a session judges its cases against something: a baseline, the history or a reference environment
    (a ``--dlperf-data-only`` session times loaders and judges nothing)."""
    if options.data_only:
        return False
    return baseline is not None or bool(options.baseline_from_history) or bool(options.against)


def gaps(cases: Iterable[Case], missing_reason) -> list[Gap]:
    """The cases that cannot be measured here (``missing_reason(case)``: why, or None), in order."""
    return [Gap(case.id, why) for case in cases if (why := missing_reason(case))]


def refusal(found: Sequence[Gap]) -> str:
    """The lines that stop a session with gaps: each case and why, then what to do."""
    lines = [f"dlperf: {len(found)} selected case(s) cannot be measured here, so this session cannot gate them:"]
    lines += [f"  {gap.case_id}: {gap.why}" for gap in found]
    lines.append("  expected every case the baseline and the markers select to run here; fix the machine, select "
                 "fewer cases (-m, -k), or give --dlperf-allow-missing to skip these")
    return "\n".join(lines)


def allowed_line(found: Sequence[Gap]) -> str:
    """The summary's first line where ``--dlperf-allow-missing`` let gaps be skipped."""
    names = ", ".join(gap.case_id for gap in found[:3]) + (", ..." if len(found) > 3 else "")
    return f"dlperf: {len(found)} selected case(s) not measured here, skipped (--dlperf-allow-missing): {names}"


def judged_nothing(results: Sequence[CaseResult]) -> bool:
    """Whether no case of a session was judged against anything.

    A node other than rank 0's in a job across nodes judges nothing by design (rank 0's node reports): a
    session whose every case is REMOTE owes no judgement.
    """
    own = [r for r in results if r.verdict is not Status.REMOTE]
    return bool(own) and not any(r.verdict in JUDGED for r in own)


def nothing_line(results: Sequence[CaseResult], recorded: bool) -> str:
    """The summary's first line of a session that gates and judged nothing."""
    measured = sum(r.measured for r in results)
    what = (f"its {measured} measured case(s) were recorded as this machine's baseline instead" if recorded
            else f"{len(results)} case(s), none judged against a baseline")
    return f"dlperf: this session was asked to gate and judged nothing: {what}"


def under_ci() -> bool:
    """Whether this runs in a CI job (the ``CI`` variable set to anything but false, 0 or empty)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
