"""The history's typed rows: one :class:`SessionRow` per session, one :class:`CaseRow` per judged case.

A session row carries the environment that matters when a figure changes: the machine class
(the name ``--dlperf-machine`` gave it, else GPU model and count, or CPU model and count: figures are only
compared within one), the GPU
driver, torch / CUDA / cuDNN / NCCL versions, the git commit and branch of the code under test,
the host and the time.  The whole environment document (:func:`pytest_dlperf.environment.collect`)
is kept beside them as JSON.  A case row carries the judged median, the medians of the case's
runs (its spread), its verdict and the line that says why, unit, settings and the baseline it was
judged against; where the session had them, its scaling efficiency, MFU and time to target, and
whether its runs were measured on a busy machine.

A case's *trend* is made of every night's measured figure, decided or not, less a night whose every run was
measured on a busy machine (:attr:`CaseRow.on_trend`): a night a slowdown left undecided is exactly the one the
trend and the drift between nights must see.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..results.case import CaseResult

#: The fields of a session that :func:`environment_changes` compares across a change point, with their labels.
COMPARED = (("torch", "torch"), ("cuda", "CUDA"), ("cudnn", "cuDNN"), ("nccl", "NCCL"), ("driver", "driver"),
            ("git_commit", "git"), ("git_branch", "branch"), ("gpu", "GPU"), ("hostname", "host"))
#: The verdicts of a judged case, the rows a session writes: measured (``pass``, ``improved``,
#: ``no-baseline``, ``inconclusive``), failed or crashed.  Skipped, remote and data-only cases are no
#: figure of training throughput.
WRITTEN_VERDICTS = ("pass", "improved", "no-baseline", "inconclusive", "fail", "error")


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
    #: An A/B session (``--dlperf-against``, schema version 5): its reference (``git HEAD~1``, a Python's path); its
    #: cases' figures are the candidate's, its baselines the reference's, and it is no night of either side.
    against: str | None = None
    #: The version of the verdict's rules it was judged by (:data:`pytest_dlperf.gate.rules.VERDICT_RULES`, schema
    #: version 7); None for a session written before it.
    verdict_rules: int | None = None

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
    #: reference that marks a later run on a slower host busy (:mod:`pytest_dlperf.gate.figures`).
    memory_gbs: float | None = None
    #: The median core speed its counted runs' core probe measured (GFLOP/s; schema version 3), likewise.
    core_gflops: float | None = None
    # Schema version 4: what a night's verdict was and why, and the case's other figures.
    message: str | None = None  # the verdict's line ("...: 4,697 img/s is 6.0% below the baseline ...")
    #: Why every run of the night was measured on a busy machine ("other processes used 180% CPU"), so
    #: that its figure is theirs and decided nothing; None where some run counted.
    busy: str | None = None
    busy_runs: int | None = None  # its runs measured on a busy machine, not counted
    scaling_efficiency: float | None = None  # an N-rank case: speedup / N against one rank
    mfu: float | None = None  # model FLOPs utilization, where the GPU's peak is known
    #: A time-to-accuracy case: the median seconds to its target (``throughput`` is None, ``unit`` "s",
    #: ``baseline`` and ``tolerance`` the baseline's time to target).
    time_to_target: float | None = None
    #: Schema version 6: whether the night's runs decided its verdict (False: undecided, whatever a policy made of
    #: it, as a night the never-deciding rule failed); None where it is not known (a crash, a row of an older store).
    decided: bool | None = None
    #: Schema version 8: seconds per step of each phase of its step (:mod:`pytest_dlperf.gate.attribution`).
    phases: Mapping[str, float] | None = None

    @property
    def undecided(self) -> bool:
        """Whether the night's runs decided nothing: an undecided judgement, or an older row's ``inconclusive``."""
        return self.decided is False or (self.decided is None and self.verdict == "inconclusive")

    @property
    def on_trend(self) -> bool:
        """Whether this figure is a point of the case's trend: measured on counted runs (an undecided night too;
        not one whose every run was busy, whose figure is the machine's)."""
        return finite(self.throughput) and not self.busy


@dataclasses.dataclass(frozen=True)
class Point:
    """A case's figure in one session, as read back: what a series is made of."""

    session: SessionRow
    case: CaseRow


def finite(value: float | None) -> bool:
    """Whether ``value`` is a figure: a finite number (an old row may hold none, or an infinity or NaN)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def machine_class(device: str, env: Mapping[str, Any], name: str | None = None) -> str:
    """This session's machine class: the name the user gave it (``name``, else the environment's ``machine``:
    ``--dlperf-machine``), else the GPU model and count, else the CPU model and its CPUs."""
    from ..baseline.machines import this_machine  # the controller's machine comparison, one place

    named = name or env.get("machine")
    if isinstance(named, str) and named:
        return named  # one named machine's nights line up, whatever its hardware drifts to
    machine = this_machine(device, env)
    if machine.kind == "cuda":
        count = (env.get("gpus") or {}).get("count") or 0
        return f"{count} x {machine.model or 'unknown GPU'}"
    return machine.describe()


def session_row(env: Mapping[str, Any], device: str, *, created: _dt.datetime | None = None,
                session_id: str | None = None, against: str | None = None,
                verdict_rules: int | None = None) -> SessionRow:
    """The session row of a session whose environment is ``env`` and whose cases ran on ``device`` (``against``: an
    A/B session's reference)."""
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
        nccl=versions.get("nccl"), git_commit=commit, git_branch=git.get("branch"), environment=dict(env),
        against=against, verdict_rules=verdict_rules)


def results_device(document: Mapping[str, Any]) -> str:
    """The device the cases of a results document (``--dlperf-json``) ran on, as its session gave it to
    :func:`session_row`: ``--dlperf-device`` unless ``auto``, else the device of the environment's ``device``."""
    asked = (document.get("options") or {}).get("device") or "auto"
    if asked != "auto":
        return asked
    found = ((document.get("environment") or {}).get("device") or {}).get("type")
    return found if found in ("cuda", "cpu") else "auto"


def results_session_row(document: Mapping[str, Any], device: str | None = None, *,
                        created: _dt.datetime | None = None) -> SessionRow:
    """The session row of the session whose results document (``--dlperf-json``) is ``document``: its environment,
    A/B reference and verdict rules, its cases run on ``device`` (default: :func:`results_device`).  The session
    writes it so at its end, and ``dlperf history import`` from its file (with the file's ``created``)."""
    against = document.get("against")
    reference = against and against["reference"]
    return session_row(document.get("environment") or {}, device or results_device(document), created=created,
                       against=reference and f"{reference['kind']} {reference['given']}",
                       verdict_rules=document.get("verdict_rules"))


def case_rows(results: Iterable[CaseResult]) -> list[CaseRow]:
    """The judged cases of a session's results (typed :class:`~pytest_dlperf.results.case.CaseResult`): measured,
    inconclusive or failed ones (:data:`WRITTEN_VERDICTS`); skipped, remote and data-only cases are no figure
    of training throughput."""
    rows = []
    for result in results:
        verdict = None if result.verdict is None else result.verdict.value
        if verdict not in WRITTEN_VERDICTS:
            continue
        runs = tuple(run.median for run in result.attempts[-1].runs if run.median is not None) if result.attempts \
            else ()
        baseline = None if result.baseline is None else result.baseline.throughput
        tolerance = None if result.baseline is None else result.baseline.tolerance
        convergence = result.convergence or {}
        if convergence:  # a time-to-accuracy case: its figure is the time to target, and so is its baseline's
            expected = convergence.get("baseline") or {}
            baseline, tolerance = expected.get("seconds"), expected.get("tolerance")
        evidence = result.evidence
        busy = evidence.busy if evidence is not None else []
        rows.append(CaseRow(
            case_id=result.id, case=result.case.to_dict(), unit=result.unit, throughput=result.throughput,
            runs=runs, verdict=verdict, baseline=baseline, tolerance=tolerance,
            # The median of the counted runs' host probes, as a saved baseline entry keeps them.
            memory_gbs=evidence.probe_median("memory_gbs") if evidence is not None else None,
            core_gflops=evidence.probe_median("core_gflops") if evidence is not None else None,
            message=result.message or None,
            busy=busy[-1].busy if busy and evidence.estimate is None else None,
            busy_runs=len(busy) if evidence is not None else None,
            scaling_efficiency=None if result.scaling is None else result.scaling.efficiency,
            mfu=(result.flops or {}).get("mfu"), time_to_target=convergence.get("seconds_to_target"),
            decided=None if verdict == "error" or result.judgement is None else not result.judgement.undecided,
            phases=result.phases))
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
