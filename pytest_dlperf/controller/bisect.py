"""The session's exit status for ``git bisect run`` (``dlperf_bisect_exit``).

``git bisect run CMD`` reads CMD's exit status as the commit's mark: 0 good, 125 "cannot test this
commit" (skip), 1 to 127 but 125 bad, anything else aborts the bisection
(https://git-scm.com/docs/git-bisect#_bisect_run).  pytest's own status reads an INCONCLUSIVE session
as 0 (the case passed, in yellow), which bisect would mark good.  :func:`bisect_exit` maps the
session's verdicts instead, from the worst:

1. the session was interrupted, or pytest failed inside: :data:`ABORT` (the bisection stops; a
   commit that cannot be judged is a skip, a broken run of the harness is not);
2. a case FAILED (a regression, or the history gate): :data:`BAD`;
3. any case that did not decide (INCONCLUSIVE, which includes two busy runs in a row; ERROR: the
   training crashed, ran out of memory or hung at this commit; no baseline entry), no judged case at
   all, or pytest failed otherwise (an output the job asked for not written): :data:`SKIP`;
4. else (every judged case PASS or IMPROVED): :data:`GOOD`.

A pure function of the verdicts and pytest's status, so that it is tested without a session.  A usage
error (a bad option, an unknown model) raised before the session starts never reaches it: pytest exits 4,
which bisect reads as bad (docs/triage.md says how to skip such a commit).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from ..results.case import Status

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
#: Verdicts that judged the commit good.
DECIDED_GOOD = frozenset({Status.PASS, Status.IMPROVED})
#: Verdicts that say nothing about the commit's throughput and never skip it by themselves.
NEUTRAL = frozenset({Status.SKIPPED, Status.REMOTE, Status.DATA_ONLY})


def bisect_exit(verdicts: Iterable[Status], exitstatus: int | pytest.ExitCode, gate_failed: bool = False) -> int:
    """The exit status ``git bisect run`` reads for a session whose cases ended with ``verdicts`` and whose
    pytest status is ``exitstatus`` (``gate_failed``: the ``--dlperf-history-gate`` failed the session)."""
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return ABORT
    verdicts = [Status(v) for v in verdicts]
    if gate_failed or Status.FAIL in verdicts:
        return BAD
    judged = [v for v in verdicts if v not in NEUTRAL]
    if not judged or any(v not in DECIDED_GOOD for v in judged):
        return SKIP
    if exitstatus not in (pytest.ExitCode.OK,):
        return SKIP
    return GOOD
