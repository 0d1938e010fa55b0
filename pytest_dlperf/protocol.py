"""The contract between the controller (the pytest plugin) and the worker, in one place.

One run of a case is one worker process per rank, started by the controller
(:mod:`pytest_dlperf.launch.process`, through a launcher) in a run folder ``RUN_DIR``::

    controller                                   worker (each rank)
    ----------                                   ------------------
    RUN_DIR/spec.json          (WorkerSpec)  ->  python -m pytest_dlperf.worker RUN_DIR/spec.json
    RUN_DIR/progress.json      (Progress)    <-  rank 0 rewrites it outside the windows
    RUN_DIR/result-rank{R}.json (WorkerResult) <- each rank, once, when it ends
    exit status                                  EXIT_OK (0), EXIT_ERROR (1), EXIT_OOM (3)

:class:`WorkerSpec` says what to run: the case, the device, the warm-up and windows, where the model was registered
and the run's options.  The controller builds it from its run parameters (:meth:`WorkerSpec.from_params`) and
places it in the run folder (:meth:`WorkerSpec.placed`) just before it starts the process.

:class:`Progress` is rank 0's report of its step time and the steps it has left (without ``dlperf_timeout`` the
controller moves its deadline to ``3 x step_seconds x remaining_steps + 60`` seconds from it) and of its pace.

:class:`WorkerResult` is what a rank measured, or why it could not (``status`` is one of :class:`WorkerStatus`).
On disk it is a ``dlperf-worker-result`` document: schema ``pytest_dlperf/schemas/result.schema.json``, every field
documented in ``docs/worker-result.md``.

This module is the only one both sides import for the contract: it imports :mod:`pytest_dlperf.cases` and the
standard library, nothing of the controller (process, runs, launchers, plugin, reporting) and nothing of the worker.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
from collections.abc import Mapping
from typing import Any, TypedDict

from .cases import Case

SPEC_FILE = "spec.json"
PROGRESS_FILE = "progress.json"
RESULT_PREFIX = "result-rank"  # + the rank + ".json"
RESULT_KIND = "dlperf-worker-result"
RESULT_SCHEMA_VERSION = 2  # 2 adds the windows' phases and phase_timing (issue 49); 1 still reads

EXIT_OK, EXIT_ERROR, EXIT_OOM = 0, 1, 3


def result_file(rank: int) -> str:
    """The name of rank ``rank``'s result in the run folder: ``result-rank{rank}.json``."""
    return f"{RESULT_PREFIX}{rank}.json"


def result_rank(name: str) -> int | None:
    """The rank of a result file name (``result-rank3.json``: 3), or None for another file."""
    if not (name.startswith(RESULT_PREFIX) and name.endswith(".json")):
        return None
    digits = name[len(RESULT_PREFIX):-len(".json")]
    return int(digits) if digits.isdigit() else None


class ValueEnum(str, enum.Enum):
    """An enum whose members are their values: a ``str`` equal to, printed as and hashed as its value, so that a
    document holds the value and ``{Status.FAIL: ...}.get("fail")`` finds the member.  The base of the package's
    outcome enums (worker status, run status, verdicts, stop reasons, failure kinds)."""

    def __str__(self) -> str:
        return self.value

    __hash__ = str.__hash__


class WorkerStatus(ValueEnum):
    """A worker result's ``status``: the worker's exit status follows it (:data:`EXIT_CODES`).  A ``str``,
    so the document holds its value."""

    OK = "ok"  # measured
    OOM = "oom"  # the allocator (or the memory cap) ran out of memory
    ERROR = "error"  # any other exception: see the result's ``error``


EXIT_CODES = {WorkerStatus.OK: EXIT_OK, WorkerStatus.OOM: EXIT_OOM, WorkerStatus.ERROR: EXIT_ERROR}


# --------------------------------------------------------------------------- controller -> worker

@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where the case's model was registered, so that the worker registers it too (a conftest.py)."""

    file: str | None = None
    module: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "module": self.module}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ModelSource:
        data = data or {}
        return cls(data.get("file"), data.get("module"))


#: A convergence case's target metrics: whether a higher value is better.
METRICS = {"top1": True, "top5": True, "loss": False}


@dataclasses.dataclass(frozen=True)
class ConvergenceSpec:
    """What a convergence run trains to (:mod:`pytest_dlperf.worker.convergence`): its target, budget and recipe.
    ``lr`` is the peak learning rate per 256 samples of global batch, scaled linearly with the global batch after
    ``warmup_epochs`` of linear warm-up (Goyal et al. 2017, https://arxiv.org/abs/1706.02677).  The run evaluates on
    the validation split every ``eval_every`` steps (None: every epoch) and stops at the target, after
    ``max_epochs`` or after ``max_seconds`` of training."""

    metric: str  # one of METRICS
    target: float
    max_epochs: float | None = None
    max_seconds: float | None = None
    lr: float = 0.1
    warmup_epochs: float = 1.0
    eval_every: int | None = None

    def reached(self, value: float | None) -> bool:
        if value is None:
            return False
        return value >= self.target if METRICS[self.metric] else value <= self.target

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConvergenceSpec:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """``spec.json``: what one worker runs.  Fields in the order they are written.

    The fields from ``device`` to ``max_memory`` carry the controller's run parameters
    (:class:`pytest_dlperf.launch.workers.RunParams`) under the same names (:meth:`run_fields`).  ``result_dir``,
    ``progress_path`` and ``launched_at`` are set as the controller places the spec in its run folder (:meth:`placed`).
    """

    case: Case  # batch_size always a number: the controller resolves "max" first
    device: str  # "cuda" or "cpu"
    warmup_steps: int
    steps: int
    repeats: int
    model_source: ModelSource | None = None
    telemetry: bool = True  # False: no sampler (dlperf_no_telemetry)
    peak_tflops: float | None = None  # one device's peak for MFU (dlperf_peak_tflops); None: the table
    data_dir: str | None = None  # the ImageFolder of data=torchvision/dali cases (--dlperf-data-dir)
    data_workers: int | None = None  # loader workers / DALI threads per rank; None: from the CPUs
    data_only: bool = False  # time the data loader alone, no model (--dlperf-data-only)
    max_memory: int | None = None  # bytes the training may add (--dlperf-max-memory); None or 0: no cap
    share_gpus: bool = False  # rank r on visible GPU r mod their count, over gloo (--dlperf-share-gpus)
    dist_backend: str = "auto"  # the process group's: auto (NCCL on GPUs, gloo on CPUs), nccl, gloo
    convergence: ConvergenceSpec | None = None  # a convergence case: train to a target, not timed windows
    profile: bool = False  # profile steps under torch.profiler instead of timing windows (--dlperf-profile)
    run_index: int = 0  # which run of the case (0, 1, ...): a convergence run seeds its training with it
    distributed: bool = False  # start a process group even for one rank (the launcher says so)
    result_dir: str | None = None  # where each rank writes result-rank{RANK}.json
    progress_path: str | None = None  # where rank 0 writes its Progress
    launched_at: float | None = None  # time.time() when the controller started the process

    #: Fields the spec has of its own, not from the run parameters.
    _OWN = ("case", "model_source", "run_index", "distributed", "result_dir", "progress_path", "launched_at")

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        """The fields taken from the controller's run parameters, by name."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in cls._OWN)

    @classmethod
    def from_params(cls, case: Case, model: Any, params: Any, distributed: bool = False) -> WorkerSpec:
        """The spec of one run of ``case``.

        ``model`` is the case's model spec (its ``source`` and ``module`` say where it was registered); ``params``
        the run parameters (a ``runs.RunParams``): every field of :meth:`run_fields` is read from it by name.
        """
        missing = [name for name in cls.run_fields() if not hasattr(params, name)]
        if missing:
            raise TypeError(f"run parameters without the worker spec's fields {', '.join(missing)}")
        return cls(case=case, model_source=ModelSource(model.source, model.module), distributed=distributed,
                   **{name: getattr(params, name) for name in cls.run_fields()})

    def placed(self, result_dir: str, progress_path: str, launched_at: float | None = None) -> WorkerSpec:
        """This spec placed in a run folder, launched now (or at ``launched_at``)."""
        return dataclasses.replace(self, result_dir=result_dir, progress_path=progress_path,
                                   launched_at=time.time() if launched_at is None else launched_at)

    @property
    def total_steps(self) -> int:
        """The steps the worker trains after any compile steps: warm-up and windows."""
        return self.warmup_steps + self.steps * self.repeats

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["case"] = self.case.to_dict()
        out["model_source"] = self.model_source.to_dict() if self.model_source is not None else None
        out["convergence"] = self.convergence.to_dict() if self.convergence is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerSpec:
        """A spec from its JSON: ``case`` to ``repeats`` are required; the rest default
        (``telemetry`` is on unless it is ``false``).  Other keys are ignored."""
        source = data.get("model_source")
        return cls(
            case=Case.from_dict(data["case"]),
            device=data["device"],
            warmup_steps=data["warmup_steps"],
            steps=data["steps"],
            repeats=data["repeats"],
            model_source=ModelSource.from_dict(source) if source is not None else None,
            telemetry=data.get("telemetry") is not False,
            peak_tflops=data.get("peak_tflops"),
            data_dir=data.get("data_dir"),
            data_workers=data.get("data_workers"),
            data_only=bool(data.get("data_only")), max_memory=data.get("max_memory"), profile=bool(data.get("profile")),
            share_gpus=bool(data.get("share_gpus")), dist_backend=data.get("dist_backend") or "auto",
            convergence=ConvergenceSpec.from_dict(data["convergence"]) if data.get("convergence") else None,
            run_index=int(data.get("run_index") or 0),
            distributed=bool(data.get("distributed")),
            result_dir=data.get("result_dir"), progress_path=data.get("progress_path"),
            launched_at=data.get("launched_at"),
        )


@dataclasses.dataclass(frozen=True)
class Progress:
    """``progress.json``: rank 0's step time and the steps it has left, and where it is (any may be missing).

    ``step_seconds`` and ``remaining_steps`` set the controller's time limit; ``phase`` (:data:`PHASES`), the warm-up
    steps and windows done so far and the last window's figure are what the controller shows while a case runs; the
    steps done and the samples of a step, a run's pace (:mod:`pytest_dlperf.gate.far`), and the phases of its steps so
    far, what a run cut short far off says of its time.  The worker rewrites the file outside the measured windows
    only: during the warm-up (at most once a second) and after each window."""

    step_seconds: float | None
    remaining_steps: int | None
    time: float | None = None  # time.time() when written
    phase: str | None = None  # one of PHASES
    warmup_done: int | None = None
    warmup_total: int | None = None
    windows_done: int | None = None
    windows_total: int | None = None
    last_throughput: float | None = None  # the last window's samples per second
    steps_done: int | None = None  # after any compile steps
    samples_per_step: float | None = None  # of one step on all ranks
    phase_window: dict[str, Any] | None = None  # the steps' phases so far, as a window (worker.phaseclock.Tally)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def now(cls, step_seconds: float | None, remaining_steps: int | None, **where: Any) -> Progress:
        return cls(step_seconds, remaining_steps, time.time(), **where)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Progress:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


#: Where a worker is: compiling a ``torch.compile``d model, warming up, or timing windows.
PHASES = ("compiling", "warm-up", "measuring")


# --------------------------------------------------------------------------- controller <-> fork server

#: ``python -m FORK_SERVER``: the process that has imported what a run imports and forks each run's worker.
FORK_SERVER = "pytest_dlperf.worker.forkserver"
#: The run id in the fork server's own environment: each forked worker writes its run's id (as long) over it.
RUN_ID_PLACEHOLDER = "x" * 32


@dataclasses.dataclass(frozen=True)
class ForkRequest:
    """One line to the fork server (its stdin): fork a process that runs ``python -m MODULE ARGV`` (our worker,
    ``argv`` its spec; or torchrun, whose ranks it forks in turn), with the environment ``env``, in ``cwd``,
    its output appended to ``stdout`` and ``stderr``.  The server answers on its stdout, one JSON object a
    line: ``{"ready": PID}`` once, then per request ``{"started": PID}`` (or ``{"failed": WHY}``) and, when
    that process has been reaped, ``{"ended": PID, "returncode": N}`` (negative: a signal)."""

    module: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    stdout: str
    stderr: str

    def to_line(self) -> bytes:
        return (json.dumps(dataclasses.asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> ForkRequest:
        return cls(**json.loads(line))


# --------------------------------------------------------------------------- worker -> controller

class WindowFigures(TypedDict):
    """What every measured window has: ``steps`` steps timed between device synchronizations."""
    steps: int
    samples: int
    seconds: float
    throughput: float  # samples / seconds


class Window(WindowFigures, total=False):
    """A measured window, with its phases where the worker timed them (result schema version 2)."""

    phases: dict[str, float]  # seconds per step of each phase (pytest_dlperf.worker.phases)


class ErrorInfo(TypedDict, total=False):
    type: str
    message: str
    traceback: str


@dataclasses.dataclass
class WorkerResult:
    """``result-rank{RANK}.json``: what one rank of one run measured (``docs/worker-result.md``).

    The worker fills it in as it goes and writes it whatever happens, so a failed run says how far it got.  A field
    left None is not written (the schema makes it optional), except ``final_loss``: with status ``ok`` it is always
    written, ``null`` when the loss was not finite.  :meth:`to_dict` writes the keys in :data:`RESULT_KEYS`'s order.
    """

    case: dict[str, Any]  # the spec's case, as given
    rank: int
    world_size: int
    device: dict[str, Any]  # type ("cuda"/"cpu"), name, index; a CPU's intra_op_threads (torch.get_num_threads())
    status: WorkerStatus = WorkerStatus.ERROR  # error until the worker says otherwise
    warmup_steps: int | None = None
    steps: int | None = None
    repeats: int | None = None
    windows: list[Window] | None = None  # global windows (all ranks' samples over the slowest's seconds)
    warnings: list[str] | None = None
    settings: dict[str, Any] | None = None  # the effective settings
    unit: str | None = None  # img/s, seq/s or tokens/s
    samples_per_step: int | None = None  # global: per-device batch x world size (x tokens per sample)
    memory_cap: dict[str, Any] | None = None  # with max_memory: the cap this worker ran under
    telemetry: dict[str, Any] | None = None  # this rank's sampler; None when the spec turns it off
    ranks: list[dict[str, Any]] | None = None  # several ranks, on rank 0: each rank's own figures
    data: dict[str, Any] | None = None  # data=torchvision/dali: the loader's figures
    timing: dict[str, float] | None = None  # setup, warm-up, measured, total (and compile) seconds
    final_loss: float | None = None
    flops: dict[str, Any] | None = None  # rank 0: FLOPs per sample, TFLOP/s, peak, MFU
    convergence: dict[str, Any] | None = None  # a convergence run, rank 0: target, curve, time to target
    interference: dict[str, Any] | None = None  # what else used the machine during the windows
    phase_timing: dict[str, Any] | None = None  # how the windows' phases were timed, or why not (worker.phases)
    profile: dict[str, Any] | None = None  # a profiled run's top operators (worker.operators)
    error: ErrorInfo | None = None  # status oom or error: type, message, traceback
    versions: dict[str, str | None] | None = None  # torch, torchvision, cuda
    schema_version: int = RESULT_SCHEMA_VERSION
    kind: str = RESULT_KIND

    @classmethod
    def started(cls, spec: WorkerSpec, rank: int, world_size: int) -> WorkerResult:
        """The result of a rank that has not measured anything yet (status ``error``)."""
        return cls(case=spec.case.to_dict(), rank=rank, world_size=world_size,
                   device={"type": spec.device, "name": "unknown", "index": None},
                   warmup_steps=spec.warmup_steps, steps=spec.steps, repeats=spec.repeats, windows=[], warnings=[])

    @property
    def ok(self) -> bool:
        return self.status == WorkerStatus.OK

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name in RESULT_KEYS:
            value = getattr(self, name)
            if value is not None or (name == "final_loss" and self.ok):
                out[name] = value
        out["status"] = WorkerStatus(self.status).value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerResult:
        """A result from its (schema-checked) document; a key the result does not have raises TypeError."""
        unknown = sorted(set(data) - set(RESULT_KEYS))
        if unknown:
            raise TypeError(f"a worker result has no field {', '.join(map(repr, unknown))}")
        result = cls(**data)
        result.status = WorkerStatus(result.status)
        return result


#: A worker result's keys in the order the worker writes them (``docs/worker-result.md``).
RESULT_KEYS = ("schema_version", "kind", "status", "case", "rank", "world_size", "device", "warmup_steps", "steps",
        "repeats", "windows", "warnings", "settings", "unit", "samples_per_step", "memory_cap", "telemetry",
        "ranks", "data", "timing", "final_loss", "flops", "convergence", "interference", "phase_timing",
        "profile", "error", "versions")
assert set(RESULT_KEYS) == {f.name for f in dataclasses.fields(WorkerResult)}
