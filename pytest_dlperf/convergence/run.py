"""Running a convergence case: its runs through the session's launcher, its verdict and its record."""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING

from .. import baseline as baseline_mod
from .. import models
from ..results import CaseFailed, CaseResult, Status
from ..launch.workers import CaseError, RemoteRankZero, measure
from .figures import RunFigures, pooled
from .goal import describe, goal_of
from .verdict import ExpectedTime, judge_time

if TYPE_CHECKING:
    from ..cases import Case
    from ..session import DlperfSession

#: The unit of a convergence case's judged figure.
UNIT = "s"


def expected_time(session: DlperfSession, entry: baseline_mod.Entry | None) -> ExpectedTime | None:
    """The entry's ``time_to_target`` with its tolerance, or None (no figure, or unjudged on this machine)."""
    if entry is None or entry.time_to_target is None or entry.unjudged:
        return None
    tolerance = entry.tolerance if entry.tolerance is not None else (
        session.options.tolerance or baseline_mod.DEFAULT_TOLERANCE)
    return ExpectedTime(entry.time_to_target, tolerance, entry.source)


def run_case(session: DlperfSession, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
             properties: list[tuple[str, object]]) -> None:
    """Train ``case`` to its target in ``seeds`` fresh runs, judge and record it; raise CaseFailed when it failed."""
    spec = models.get_model_spec(case.model)
    goal = goal_of(case, entry)
    runs = (entry.seeds if entry is not None and entry.seeds else None) or session.options.runs
    params = dataclasses.replace(session.params_for(entry), convergence=goal, runs=runs,
                                 data_dir=session.options.convergence_data)
    result = CaseResult(id=case.id, nodeid=nodeid, case=case, unit=UNIT, parameters=params.to_dict())
    session.results.append(result)
    started = time.monotonic()
    try:
        session.live.start()
        try:
            attempt = measure(case, spec, params, session.case_dir(case) / "attempt0", session.launcher,
                              on_progress=functools.partial(session.live.update, case.id, spec.unit, 0))
        finally:
            session.live.finish()
    except RemoteRankZero as part:
        result.attempts.append({"throughput": None, "runs": part.runs})
        result.verdict = Status.REMOTE
        result.message = f"{case.id}: ranks of a convergence run ran on this node; the node of rank 0 reports"
        properties.append(("dlperf_verdict", Status.REMOTE.value))
        return
    except CaseError as exc:
        raise result.record_error(exc.message, exc.runs, properties) from None
    finally:
        result.record_end(started)
    figures = [RunFigures.from_dict(run["convergence"]) for run in attempt.runs]
    record(session, case, entry, result, figures, attempt.runs, goal.to_dict(), describe(goal), attempt.device,
           attempt.warnings, properties)


def record(session: DlperfSession, case: Case, entry: baseline_mod.Entry | None, result: CaseResult,
           figures: list[RunFigures], runs: list[dict], goal: dict, budget: str, device: dict | None,
           warnings: list[str], properties: list[tuple[str, object]]) -> None:
    """Judge the runs' times to target (:func:`judge_time`) and record them in ``result``; raise CaseFailed
    when the case failed.  ``goal``: what the runs trained to (the results' ``convergence.goal``);
    ``budget``: the goal in words, for the message of a run that did not reach it."""
    expected = expected_time(session, entry)
    verdict = judge_time(case.id, figures, expected, budget=budget,
                         require_baseline=session.options.require_baseline, inconclusive=session.options.inconclusive)
    result.attempts.append({"throughput": None, "runs": runs})
    result.convergence = {**pooled(figures), "goal": goal,
                          "baseline": dataclasses.asdict(expected) if expected is not None else None}
    result.device, result.difference = device, verdict.difference
    notes = [entry.unjudged] if entry is not None and entry.unjudged else []
    result.verdict = verdict.status
    result.message = "; ".join([verdict.message, *notes, *warnings])
    properties.append(("dlperf_verdict", verdict.status.value))
    if result.convergence["seconds_to_target"] is not None:
        properties.append(("dlperf_time_to_target", round(result.convergence["seconds_to_target"], 3)))
    if verdict.failed:
        raise CaseFailed(result.message)
