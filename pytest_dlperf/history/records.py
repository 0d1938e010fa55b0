"""The history's typed rows: one :class:`SessionRow` per session, one :class:`CaseRow` per judged case.

A session row carries the environment that matters when a figure changes: the machine class
(GPU model and count, or CPU model and count: figures are only compared within one), the GPU
driver, torch / CUDA / cuDNN / NCCL versions, the git commit and branch of the code under test,
the host and the time.  The whole environment document (:func:`pytest_dlperf.environment.collect`)
is kept beside them as JSON.  A case row carries the judged median, the medians of the case's
runs (its spread), its verdict, unit, settings and the baseline it was judged against.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import statistics
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..baseline import counted_probe

#: The fields of a session that :func:`environment_changes` compares across a change point, with their labels.
COMPARED = (("torch", "torch"), ("cuda", "CUDA"), ("cudnn", "cuDNN"), ("nccl", "NCCL"), ("driver", "driver"),
            ("git_commit", "git"), ("git_branch", "branch"), ("hostname", "host"))


@dataclasses.dataclass(frozen=True)
class SessionRow:
    """One pytest session that wrote history."""

    id: str
    created: str  # ISO 8601 UTC with microseconds: sorts as text
    machine: str  # the machine class: "AMD EPYC, 2 CPUs" or "8 x NVIDIA H100 80GB HBM3"
    hostname: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    driver: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    git_commit: str | None = None
    git_branch: str | None = None
    environment: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def short_commit(self) -> str | None:
        return self.git_commit[:7] if self.git_commit else None

    @property
    def date(self) -> str:
        return self.created[:16].replace("T", " ")


@dataclasses.dataclass(frozen=True)
class CaseRow:
    """One judged case of a session."""

    case_id: str
    case: Mapping[str, Any]  # Case.to_dict(): model, precision, batch_size, gpus, settings
    unit: str | None
    throughput: float | None  # the judged median; None when the case crashed
    runs: tuple[float, ...]  # the medians of its runs' windows
    verdict: str
    baseline: float | None = None
    tolerance: float | None = None
    #: The median memory bandwidth its counted runs' probe measured (GB/s; schema version 2), the
    #: reference that marks a later run on a slower host busy (:mod:`pytest_dlperf.evidence`).
    memory_gbs: float | None = None
    #: The median core speed its counted runs' core probe measured (GFLOP/s; schema version 3), likewise.
    core_gflops: float | None = None


@dataclasses.dataclass(frozen=True)
class Point:
    """A case's figure in one session, as read back: what a series is made of."""

    session: SessionRow
    case: CaseRow


def machine_class(device: str, env: Mapping[str, Any]) -> str:
    """This session's machine class: the GPU model and count, else the CPU model and its CPUs."""
    from ..machines import this_machine  # the controller's machine comparison, one place

    machine = this_machine(device, env)
    if machine.kind == "cuda":
        count = (env.get("gpus") or {}).get("count") or 0
        return f"{count} x {machine.model or 'unknown GPU'}"
    return machine.describe()


def session_row(env: Mapping[str, Any], device: str, *, created: _dt.datetime | None = None,
                session_id: str | None = None) -> SessionRow:
    """The session row of a session whose environment is ``env`` and whose cases ran on ``device``."""
    versions = env.get("versions") or {}
    gpus = env.get("gpus") or {}
    git = env.get("git") or {}
    when = created or _dt.datetime.now(_dt.timezone.utc)
    commit = git.get("commit")
    if commit and git.get("dirty"):
        commit += "+dirty"
    return SessionRow(
        id=session_id or uuid.uuid4().hex, created=when.astimezone(_dt.timezone.utc).isoformat(timespec="microseconds"),
        machine=machine_class(device, env), hostname=(env.get("host") or {}).get("hostname"),
        gpu=gpus.get("model"), gpu_count=gpus.get("count"), driver=gpus.get("driver") or versions.get("driver"),
        torch=versions.get("torch"), cuda=versions.get("cuda"), cudnn=versions.get("cudnn"),
        nccl=versions.get("nccl"), git_commit=commit, git_branch=git.get("branch"), environment=dict(env))


def run_medians(attempt: Mapping[str, Any]) -> tuple[float, ...]:
    """The median of each run's windows in an attempt (``CaseResult.attempts[-1]``)."""
    out = []
    for run in attempt.get("runs") or []:
        figures = [w["throughput"] for w in run.get("windows") or [] if w.get("throughput") is not None]
        if figures:
            out.append(float(statistics.median(figures)))
    return tuple(out)


def case_rows(results: Iterable[Any]) -> list[CaseRow]:
    """The judged cases of a session's results (typed :class:`~pytest_dlperf.results.CaseResult`): measured or
    failed ones; skipped, remote and data-only cases are no figure of training throughput."""
    rows = []
    for result in results:
        verdict = getattr(result.verdict, "value", result.verdict)
        if verdict not in ("pass", "improved", "no-baseline", "fail", "error"):
            continue
        runs = run_medians(result.attempts[-1]) if result.attempts else ()
        rows.append(CaseRow(
            case_id=result.id, case=result.case.to_dict(), unit=result.unit, throughput=result.throughput,
            runs=runs, verdict=verdict, baseline=None if result.baseline is None else result.baseline.throughput,
            tolerance=None if result.baseline is None else result.baseline.tolerance,
            memory_gbs=counted_probe(result.evidence, "memory_gbs"),
            core_gflops=counted_probe(result.evidence, "core_gflops")))  # as a saved baseline entry keeps it
    return rows


def environment_changes(before: SessionRow, after: SessionRow) -> list[str]:
    """What differs between two sessions: ``torch 2.13.0 -> 2.14.1``, ``git 3fa2c1e..9b04d7e``."""
    out = []
    for field, label in COMPARED:
        old, new = getattr(before, field), getattr(after, field)
        if old == new:
            continue
        if field == "git_commit":
            out.append(f"git {(old or '?')[:7]}..{(new or '?')[:7]}" + ("+dirty" if new and new.endswith("+dirty")
                                                                        else ""))
        else:
            out.append(f"{label} {old or '?'} -> {new or '?'}")
    return out
