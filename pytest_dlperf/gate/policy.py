"""The session's policies on a judgement, applied once for every kind of case (:func:`settle`).

A kind's ``judge`` says what its evidence shows: an undecided case is INCONCLUSIVE, with ``undecided`` set and,
where its estimate lies on the failing side of its threshold, ``beyond``.  What the session then makes of it is
policy, here and nowhere else:

1. ``--dlperf-inconclusive`` (:data:`INCONCLUSIVE_POLICIES`): ``pass`` leaves an undecided case green (the
   default: an unchanged case on a noisy host must not fail), ``below`` fails one whose estimate is beyond its
   threshold ("not confirmed"), ``fail`` fails every one;
2. the never-deciding nights (``dlperf_inconclusive_nights``, with a history store): a case undecided that
   many sessions in a row, this one included, fails, since a night that never decides would stay green while
   the case could be slower by anything its noise hides; unless its last nights judged together
   (:mod:`.nights`) pass.  Where they show a regression, it fails as one.

Each returns a new :class:`~pytest_dlperf.results.judgement.Judgement` with the reason as its last line; none
edits a message.
"""

from __future__ import annotations

import dataclasses

from ..results.judgement import Judgement, Reason, Status, Why
from .nights import Nights

#: ``--dlperf-inconclusive``: which inconclusive cases fail the session.
INCONCLUSIVE_POLICIES = ("below", "fail", "pass")
#: Sessions in a row a case may end inconclusive before it fails, with a history store: a night that never decides is
#: not green forever.
INCONCLUSIVE_NIGHTS = 3


@dataclasses.dataclass(frozen=True)
class Policy:
    """What the session does with undecided cases and cases without a baseline, from its options."""

    inconclusive: str = "pass"
    require_baseline: bool = False
    nights: int = INCONCLUSIVE_NIGHTS
    #: Most runs (or pairs) of a case, for the advice on more runs; None: not said.
    max_runs: int | None = None


def inconclusive_fails(policy: str, beyond_threshold: bool) -> bool:
    """Whether an undecided case fails under ``--dlperf-inconclusive`` ``policy``: always (``fail``), never
    (``pass``), or when its estimate lies on the wrong side of the threshold (``below``)."""
    return policy == "fail" or (policy == "below" and beyond_threshold)


def inconclusive(judgement: Judgement, policy: str) -> Judgement:
    """``judgement``, failed where it is undecided and ``--dlperf-inconclusive`` ``policy`` fails it."""
    if not judgement.undecided or judgement.failed or not inconclusive_fails(policy, judgement.beyond is not None):
        return judgement
    if policy == "below":
        why = f"fails: its estimate is {judgement.beyond} the threshold, not confirmed (--dlperf-inconclusive below)"
    else:
        why = "fails: --dlperf-inconclusive fail"
    return judgement.failing(Reason(why, Why.POLICY), headline=True)


def never_decided(judgement: Judgement, streak: int, nights: int, together: Nights | None = None,
                  unit: str = "") -> Judgement:
    """``judgement``, failed where it is undecided and the case's ``streak`` last sessions (in the history store)
    were too, ``nights`` in a row with this one (``dlperf_inconclusive_nights``), unless ``together`` (its last
    nights judged together, :func:`.nights.judge`) pass; where they show a regression, it fails as one."""
    if not judgement.undecided or judgement.failed or streak + 1 < nights:
        return judgement
    if together is not None and together.clears:
        return judgement.adding(Reason(f"{together.line(unit)}: not failed for never deciding", Why.POLICY))
    if together is not None and together.regression:
        return judgement.failing(Reason(f"fails: {together.line(unit)} (dlperf_inconclusive_nights {nights})",
                                        Why.POLICY), headline=True)
    together_line = f"; {together.line(unit)}" if together is not None else ""
    advice = ("the host moved since the save: save the baseline again on this host, or gate against pairs "
              "(--dlperf-against)" if together is not None and together.scaled is not None else
              "make its runs steadier, give it more runs (--dlperf-max-runs) or a wider tolerance, or gate against "
              "pairs (--dlperf-against), whose two sides share the host's moves")
    why = (f"fails: inconclusive {streak + 1} sessions in a row in the history store (dlperf_inconclusive_nights "
           f"{nights}){together_line}: the case is never decided here; {advice}")
    return judgement.failing(Reason(why, Why.POLICY), headline=True)


def settle(judgement: Judgement, policy: Policy, streak: int | None = None, together: Nights | None = None,
           unit: str = "") -> Judgement:
    """Both policies in turn: ``--dlperf-inconclusive``, then, with a history store (``streak``: the case's
    undecided sessions before this one; ``together``: its last nights judged together), the never-deciding
    nights."""
    settled = inconclusive(judgement, policy.inconclusive)
    return settled if streak is None else never_decided(settled, streak, policy.nights, together, unit)


def refuse(judgement: Judgement, case_id: str, reason: str) -> Judgement:
    """A case measured for a baseline being saved with too few quiet runs: failed, ``reason`` leading its
    message (the save leaves it out)."""
    return judgement.failing(Reason(f"{case_id}: {reason}", Why.POLICY, Status.FAIL, lead=True))
