"""Results: the typed record of one case, converted to and from a dict only at the JSON edge.

A :class:`CaseResult` is what a session knows about a case once it ran, was skipped or
failed: its verdict (a :class:`Status`), message, figures and where they came from.  The
pipeline builds it (:mod:`pytest_dlperf.controller.pipeline`), the reports read it
(:mod:`pytest_dlperf.reporting`), and ``--dlperf-json`` writes it as one item of the
results document's ``cases`` (``schemas/results.schema.json``; :meth:`CaseResult.to_dict`
and :meth:`CaseResult.from_dict` are the only places that know its keys).

Its runs are typed records (:mod:`.runs`), its evidence the gate's (:class:`pytest_dlperf.gate.evidence.Evidence`);
the sub-documents the workers wrote (windows, telemetry, FLOPs, loader figures) stay dicts: they are
the workers' JSON, passed through (:mod:`pytest_dlperf.protocol`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..cases import Case
from ..gate.evidence import Evidence
from ..gate.paired import PairedEvidence
from ..protocol import ValueEnum
from ..worker.operators import Profile
from .host_bound import HostBound
from .judgement import Judgement, Reason, Status
from .runs import AttemptRecord

__all__ = ["FIGURES", "CaseFailed", "CaseResult", "Expected", "Figures", "GateResult", "GateStatus", "Scaling",
           "Status", "THROUGHPUT_STATUSES", "as_dicts", "cases_from"]


class CaseFailed(Exception):
    """A case that regressed or could not be measured; its message is the report."""


#: Verdicts of a throughput against its baseline (``throughput_verdict``).
THROUGHPUT_STATUSES = (Status.PASS, Status.IMPROVED, Status.NO_BASELINE, Status.FAIL, Status.INCONCLUSIVE)


@dataclasses.dataclass(frozen=True)
class Expected:
    """A baseline's figure for a case, as judged: throughput, unit, tolerance and its source."""

    throughput: float
    unit: str
    tolerance: float
    source: str | None = None
    #: The figures the expected one comes from, where there are several (a baseline from history: its
    #: last N sessions' figures), for statistics that use their spread; None for a baseline file's figure.
    figures: tuple[float, ...] | None = None
    #: The memory bandwidth (GB/s) the baseline's runs measured, the reference that marks a run on a
    #: slower host busy (:func:`pytest_dlperf.gate.figures.run_figures`); None where none was kept.
    memory_gbs: float | None = None
    #: The core speed (GFLOP/s) the baseline's runs' core probe measured, likewise; None where none was kept.
    core_gflops: float | None = None
    #: The seconds per step of each phase the baseline's runs measured (:mod:`pytest_dlperf.gate.attribution`).
    phases: Mapping[str, float] | None = None
    #: The controller's probe of the host after each of the save's counted runs (:mod:`pytest_dlperf.gate.host`).
    host_runs: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"throughput": self.throughput, "tolerance": self.tolerance, "source": self.source, "unit": self.unit}
        if self.figures is not None:
            out["figures"] = list(self.figures)
        if self.memory_gbs is not None:
            out["memory_gbs"] = self.memory_gbs
        if self.core_gflops is not None:
            out["core_gflops"] = self.core_gflops
        if self.phases is not None:
            out["phases"] = dict(self.phases)
        if self.host_runs is not None:
            out["host_runs"] = list(self.host_runs)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Expected:
        figures = data.get("figures")
        return cls(data["throughput"], data.get("unit") or "", data.get("tolerance", 0.0), data.get("source"),
                   None if figures is None else tuple(figures), data.get("memory_gbs"), data.get("core_gflops"),
                   data.get("phases"), tuple(data["host_runs"]) if data.get("host_runs") else None)


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Speedup and efficiency of an N-rank case against the same case on one rank."""

    ranks: int
    reference: float  # 1-rank throughput
    reference_source: str  # "this session", "baseline" or "measured for scaling"
    speedup: float
    efficiency: float
    minimum: float | None
    #: How the 1-rank figure was measured: ``plain process`` (one worker, no DDP: the reference NVIDIA's
    #: scaling figures divide by), ``one-rank DDP`` (a one-rank torchrun/srun/mpirun job: DDP's own cost
    #: is in the reference too, so the efficiency reads higher), or None (a baseline's figure).
    reference_kind: str | None = None
    #: The GPUs the ranks shared (``--dlperf-share-gpus``: fewer than the ranks), or None: the speedup and
    #: efficiency then measure no scaling (ranks taking turns on a GPU, all-reducing over gloo through the
    #: host) and are not gated.
    shared_gpus: int | None = None

    @property
    def failed(self) -> bool:
        return self.minimum is not None and self.efficiency < self.minimum and self.shared_gpus is None

    def to_dict(self) -> dict[str, float | int | str | None]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scaling:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


class GateStatus(ValueEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_GATED = "not gated"


@dataclasses.dataclass(frozen=True)
class GateResult:
    """The ``min_gpu_utilization`` gate of one case: the lowest GPU's mean against the minimum."""

    status: GateStatus
    minimum: float
    message: str
    measured: float | None = None  # a fraction, as the minimum
    rank: int | None = None

    @property
    def failed(self) -> bool:
        return self.status is GateStatus.FAIL

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: everything but the message, which is part of the case's own."""
        return {"minimum": self.minimum, "measured": self.measured, "rank": self.rank, "status": self.status.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        return cls(GateStatus(data["status"]), data["minimum"], data.get("message", ""), data.get("measured"),
                   data.get("rank"))


#: Fields written only when set (absent from skipped and failed cases' records).
_OPTIONAL = ("parameters", "max_batch", "duration", "device", "ranks", "convergence", "start", "compile", "phases")
#: Fields of a judged case, written even when null.
_JUDGED = ("throughput_verdict", "evidence", "scaling", "flops", "telemetry", "data", "compile_seconds",
           "gpu_utilization_gate", "hardware_mismatch")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figures:
    """What a case's runs measured, beside its verdict: the figures a case kind's measurement gives
    (:class:`~pytest_dlperf.controller.kinds.Measurement`) and a case's result keeps (:class:`CaseResult`), declared
    once for both."""

    throughput: float | None = None  # the judged median; None when nothing was measured
    stats: dict[str, Any] | None = None  # the windows' Summary (pytest_dlperf.gate.stats)
    baseline: Expected | None = None
    device: dict[str, Any] | None = None
    ranks: list[dict[str, Any]] | None = None
    telemetry: dict[str, Any] | list[dict[str, Any]] | None = None
    flops: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    compile_seconds: float | None = None
    start: str | None = None  # how its runs' workers started: "forked", "fresh" or "mixed" (Attempt.start)
    compile: str | None = None  # how its runs trained: "eager", a torch.compile mode or "mixed" (Attempt.compile)
    max_batch: dict[str, Any] | None = None
    scaling: Scaling | None = None
    gpu_utilization_gate: GateResult | None = None
    hardware_mismatch: str | None = None
    host_bound: HostBound | None = None  # a GPU case: how busy its GPUs were, and whether the host set the pace
    evidence: Evidence | None = None  # the runs as evidence: estimate, interval, busy runs (pytest_dlperf.gate)
    #: An A/B session's case (``--dlperf-against``): its pairs, their estimate and decision (gate.paired).
    paired: PairedEvidence | None = None
    convergence: dict[str, Any] | None = None  # a convergence case: pytest_dlperf.convergence.figures.pooled
    #: Seconds per step of each phase over its counted runs' windows (:func:`pytest_dlperf.gate.attribution.of_runs`)
    phases: dict[str, float] | None = None

    def figures(self) -> dict[str, Any]:
        """The figures by name (:data:`FIGURES`), which a case's result copies from a measurement."""
        return {name: getattr(self, name) for name in FIGURES}


#: The names of :class:`Figures`' fields.
FIGURES = tuple(f.name for f in dataclasses.fields(Figures))


@dataclasses.dataclass(frozen=True)
class CaseResult(Figures):
    """One case of a session: what ran, its figures and its verdict.  Built once, when the case is done
    (:meth:`of`), or read from a results document (:meth:`from_dict`); never changed after."""

    id: str
    case: Case
    nodeid: str | None = None
    unit: str | None = None
    verdict: Status | None = None  # None only in a document of a case that never finished
    message: str = ""
    difference: float | None = None  # measured / baseline - 1
    attempts: tuple[AttemptRecord, ...] = ()
    parameters: dict[str, Any] | None = None  # the RunParams the case ran with
    throughput_verdict: Status | None = None  # the throughput alone; verdict also counts the gates
    duration: float | None = None
    judged: bool = False  # went through the throughput verdict: its figure fields are all written
    #: Why a baseline being saved leaves this case out (gate.sequential.unsaved_reason); this session only.
    unsaved: str | None = None
    #: How it was judged: the status, the gates and the reasons the message is made of.
    judgement: Judgement | None = None
    #: Its top operators from one profiled run beside its timed ones (``--dlperf-profile``), never counted.
    profile: Profile | None = None

    @classmethod
    def of(cls, case: Case, nodeid: str | None, judgement: Judgement, message: str, measured: Figures | None = None,
           *, unit: str | None = None, parameters: dict[str, Any] | None = None, duration: float | None = None,
           unsaved: str | None = None, profile: Profile | None = None) -> CaseResult:
        """A case's result, whole: its judgement, its words (``message``: made from the judgement by
        :func:`pytest_dlperf.reporting.verdicts.render`) and, where it was measured, the figures of ``measured`` (a
        :class:`~pytest_dlperf.controller.kinds.Measurement`: its :class:`Figures`, its attempts, and its unit where
        it has one, else ``unit``)."""
        figures = measured.figures() if measured is not None else {}
        judged = figures.get("throughput") is not None
        return cls(id=case.id, case=case, nodeid=nodeid,
                   unit=measured.unit if measured is not None and measured.unit else unit,
                   verdict=judgement.status, message=message, difference=judgement.difference,
                   attempts=tuple(measured.attempts) if measured is not None else (), parameters=parameters,
                   throughput_verdict=judgement.main_status if judged else None, duration=duration, judged=judged,
                   unsaved=unsaved, judgement=judgement, profile=profile, **figures)

    # -- derived, so that no reader works them out again

    @property
    def measured(self) -> bool:
        """Whether the case has a judged figure (not skipped, failed to run, remote or data-only)."""
        return self.throughput is not None

    @property
    def scaling_failed(self) -> bool:
        return self.scaling is not None and self.scaling.failed

    @property
    def failed(self) -> bool:
        return self.verdict in (Status.FAIL, Status.ERROR)

    @property
    def chosen_batch(self) -> int | None:
        """The batch a ``batch_size: "max"`` search chose, or None."""
        return (self.max_batch or {}).get("chosen")

    # -- the JSON edge

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "nodeid": self.nodeid, "case": self.case.to_dict(),
            "verdict": None if self.verdict is None else self.verdict.value, "message": self.message,
            "unit": self.unit, "throughput": self.throughput, "stats": self.stats,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "difference": self.difference, "attempts": [attempt.to_dict() for attempt in self.attempts],
        }
        if self.nodeid is None:
            del out["nodeid"]
        for name in _OPTIONAL:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        judged = {
            "throughput_verdict": None if self.throughput_verdict is None else self.throughput_verdict.value,
            "scaling": None if self.scaling is None else self.scaling.to_dict(),
            "flops": self.flops, "telemetry": self.telemetry, "data": self.data,
            "compile_seconds": self.compile_seconds,
            "gpu_utilization_gate": None if self.gpu_utilization_gate is None else self.gpu_utilization_gate.to_dict(),
            "hardware_mismatch": self.hardware_mismatch,
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }
        for name in _JUDGED:
            if self.judged or judged[name] is not None:
                out[name] = judged[name]
        if self.paired is not None:
            out["paired"] = self.paired.to_dict()
        if self.host_bound is not None:
            out["host_bound"] = self.host_bound.to_dict()
        if self.judgement is not None:
            out["judgement"] = self.judgement.to_dict()
        if self.profile is not None:
            out["profile"] = self.profile.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        def typed(key: str, kind):
            value = data.get(key)
            return None if value is None else kind(value)

        return cls(
            id=data["id"], case=Case.from_dict(data["case"]), nodeid=data.get("nodeid"), unit=data.get("unit"),
            verdict=typed("verdict", Status), message=data.get("message", ""),
            throughput=data.get("throughput"), stats=data.get("stats"),
            baseline=typed("baseline", Expected.from_dict), difference=data.get("difference"),
            attempts=tuple(AttemptRecord.from_dict(a) for a in data.get("attempts") or []),
            parameters=data.get("parameters"),
            throughput_verdict=typed("throughput_verdict", Status), device=data.get("device"),
            ranks=data.get("ranks"), scaling=typed("scaling", Scaling.from_dict), flops=data.get("flops"),
            telemetry=data.get("telemetry"), data=data.get("data"), compile_seconds=data.get("compile_seconds"),
            gpu_utilization_gate=typed("gpu_utilization_gate", GateResult.from_dict),
            hardware_mismatch=data.get("hardware_mismatch"), max_batch=data.get("max_batch"),
            duration=data.get("duration"), convergence=data.get("convergence"), judged="throughput_verdict" in data,
            evidence=typed("evidence", Evidence.from_dict), paired=typed("paired", PairedEvidence.from_dict),
            start=data.get("start"), host_bound=typed("host_bound", HostBound.from_dict), compile=data.get("compile"),
            judgement=judgement_from(data), phases=data.get("phases"), profile=typed("profile", Profile.from_dict),
        )


def judgement_from(data: Mapping[str, Any]) -> Judgement | None:
    """A results document's case's judgement: its own (``judgement``), or for a document written before there
    was one, its message as one reason."""
    if data.get("verdict") is None:
        return None
    status = Status(data["verdict"])
    if "judgement" in data:
        return Judgement.from_dict(status, data["judgement"], data.get("difference"),
                                   data.get("throughput_verdict") == Status.INCONCLUSIVE.value)
    return Judgement(status, (Reason(data.get("message", "")),), difference=data.get("difference"))


def cases_from(document: Mapping[str, Any]) -> list[CaseResult]:
    """The typed cases of a results document (``--dlperf-json``, ``dlperf report``)."""
    return [CaseResult.from_dict(c) for c in document.get("cases", [])]


def as_dicts(results: Iterable[CaseResult | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Dicts of results (typed ones converted), for the JSON edge."""
    return [r.to_dict() if isinstance(r, CaseResult) else dict(r) for r in results]
