"""Log parsers: what a training script prints, as typed records of its steps (a name -> class registry).

Each parser reads one line at a time and returns the :class:`Record` s it finds there.  The built-in
ones (:mod:`.formats`) register themselves when :mod:`pytest_dlperf.commands` is imported:

``dllogger``
    NVIDIA DLLogger's JSON stream, ``DLLL {"step": [epoch, iteration], "data": {...}}``
    (https://github.com/NVIDIA/dllogger).  ``key`` names a per-step throughput
    (default ``train.total_ips``, as DeepLearningExamples' ConvNets log it) or ``time_key``
    a per-step time in seconds; a line whose ``step`` is empty (``[]``, the run's summary)
    gives a final figure under ``final_key`` (default: ``key``), and a time to train under
    ``time_to_train_key`` (seconds).  A step's ``train.data_time`` and ``train.compute_time``
    (``data_time_key``, ``compute_time_key``; on its line or one of their own) are its phases.
``mllog``
    MLPerf's ``:::MLLOG {"key": ..., "value": ..., "metadata": {...}}`` lines as
    ``mlperf_logging.mllog`` writes them (https://github.com/mlcommons/logging).  A logged
    step is one ``block_start``/``block_stop`` pair (else ``epoch_start``/``epoch_stop``): its
    seconds from their ``time_ms``, its samples from the metadata's ``samples_count`` (a running
    count), else ``train_samples`` x the block's ``epoch_count``.  Where the log has events of
    ``key`` (default ``tracked_stats``, a figure in ``value[field]``, default ``throughput``),
    those are the steps instead.  ``run_start``, ``run_stop`` (its ``status``) and
    ``eval_accuracy`` are :class:`Mark` s: a time to train.
``regex``
    Any line a regular expression matches: named group ``throughput`` (samples per second)
    or ``step_time`` (seconds per step), optional ``step``, ``rank`` and ``samples``; or
    ``time_to_train`` (seconds, a time-to-train case), optional ``status``.
``final``
    One figure per run: ``pattern``'s group ``throughput`` on the last line it matches
    (a script that prints only its average, e.g. a transformers ``Trainer``'s
    ``train_samples_per_second``).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ..registry import Registry


@dataclasses.dataclass(frozen=True)
class StepPhases:
    """Seconds of the phases of one logged step, as far as its line says them (the names of
    :mod:`pytest_dlperf.worker.phases`): ``data``, the wait for its batch; ``compute``, the rest of the step as the
    script times it."""

    data: float | None = None
    compute: float | None = None

    def named(self) -> dict[str, float]:
        """The phases the line gave, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


#: A :attr:`Record.kind` that is no step: the phases of the step of the same number, logged on a line of their own
#: (DLLogger's verbose metrics); :func:`join_phases` gives them to that step.
PHASES_ONLY = "phases"


@dataclasses.dataclass(frozen=True)
class Record:
    """One logged step (or, ``final``, a whole-run figure) as a parser read it."""

    throughput: float | None = None  # samples per second, as logged
    step_time: float | None = None  # seconds per step
    step: int | None = None
    rank: int | None = None
    samples: int | None = None  # samples of this step, where the line says
    final: bool = False
    #: What the step is, where a parser reads several kinds (``mllog``: ``key``, ``block``, ``epoch``;
    #: :data:`PHASES_ONLY`).
    kind: str | None = None
    #: The step's phases, where its log says them (DLLogger's ``train.data_time``).
    phases: StepPhases | None = None

    @property
    def is_step(self) -> bool:
        """Whether it counts as a logged step (a :data:`PHASES_ONLY` record does not)."""
        return self.kind != PHASES_ONLY


def join_phases(records: list[Record]) -> list[Record]:
    """The steps of ``records``, each given the phases of a :data:`PHASES_ONLY` record of its number next to it
    (before or after it: a log's order of verbosity levels is its own); such records without a step are dropped."""
    out: list[Record] = []
    waiting: Record | None = None
    for record in records:
        if record.is_step:
            if waiting is not None and waiting.step == record.step and record.phases is None:
                record = dataclasses.replace(record, phases=waiting.phases)
            waiting = None
            out.append(record)
        elif out and out[-1].step == record.step and out[-1].phases is None:
            out[-1] = dataclasses.replace(out[-1], phases=record.phases)
        else:
            waiting = record
    return out


class Milestone(enum.Enum):
    """A point of a run's course that is no step: what a time to train is read from."""

    RUN_START = "run_start"
    RUN_STOP = "run_stop"
    EVAL = "eval_accuracy"
    #: A time to train the script works out and logs itself (``regex``'s group, DLLogger's key).
    TIME_TO_TRAIN = "time_to_train"


@dataclasses.dataclass(frozen=True)
class Mark:
    """One :class:`Milestone` as a parser read it."""

    milestone: Milestone
    time: float | None = None  # seconds, on the log's clock (MLLOG's time_ms / 1000)
    status: str | None = None  # run_stop's (MLPerf: success or aborted); TIME_TO_TRAIN's where the line says
    value: float | None = None  # EVAL: the accuracy; TIME_TO_TRAIN: the seconds
    epoch: float | None = None  # EVAL: its epoch_num
    samples: int | None = None  # EVAL: its samples_count

#: The figures a command case may judge: a throughput (the default), or a time to train (lower is better).
FIGURES = ("throughput", "time_to_train")


class Parser:
    """A named log parser; ``options`` are its settings with their defaults (None: required).

    ``default_unit`` and ``default_scope``: a command's ``unit`` and ``scope`` where its registration gives
    none (torchtitan's ``tps`` is tokens per second of each GPU: ``tokens/s``, ``rank``);
    :meth:`logged_unit`: the unit the log's own figures are in, which the case's unit must then be.
    """

    name: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}
    default_unit: ClassVar[str | None] = None
    default_scope: ClassVar[str | None] = None

    @classmethod
    def logged_unit(cls, options: Mapping[str, Any]) -> str | None:
        """The unit of the throughput the log itself states (``tokens/s``), or None where a step's figure is its
        samples (``samples_per_step``) over its logged time."""
        return None

    def __init__(self, **options: Any):
        self.settings = {**self.options, **options}

    @classmethod
    def check(cls, who: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options, checked: ``ValueError`` naming ``who`` and the option for a mistake."""
        unknown = sorted(set(options) - set(cls.options))
        if unknown:
            raise ValueError(f"{who}: parser {cls.name!r} has no option {', '.join(map(repr, unknown))}; "
                             f"its options: {', '.join(cls.options) or '(none)'}")
        merged = {**cls.options, **options}
        missing = [k for k, v in merged.items() if v is None and k in cls.required]
        if missing:
            raise ValueError(f"{who}: parser {cls.name!r} needs {', '.join(missing)}")
        return dict(options)

    required: ClassVar[tuple[str, ...]] = ()

    def parse_line(self, line: str) -> list[Record | Mark]:
        """What one line of the log holds: its logged steps (:class:`Record`) and :class:`Mark` s."""
        raise NotImplementedError

    def finish(self, records: list[Record]) -> list[Record]:
        """The steps of a whole log, from every record its lines gave (a parser that reads several kinds of
        step keeps one kind here); the default keeps them all."""
        return records

    def missing(self, records: list[Record]) -> str | None:
        """Why the steps :meth:`finish` kept cannot be counted (what the log does not say), or None."""
        return None

    def parse(self, lines: Iterable[str]) -> tuple[list[Record], list[Mark]]:
        """A whole log: its steps (:meth:`finish`) and its marks, in order."""
        records: list[Record] = []
        marks: list[Mark] = []
        for line in lines:
            for found in self.parse_line(line):
                (marks if isinstance(found, Mark) else records).append(found)
        return self.finish(records), marks

    def describe(self) -> str:
        """What the parser looks for, for the message when a log has none of it."""
        raise NotImplementedError

    @classmethod
    def figure_problem(cls, figure: str, options: Mapping[str, Any]) -> str | None:
        """Why this parser, with ``options``, cannot read ``figure`` (:data:`FIGURES`), or None."""
        if figure == "throughput":
            return None
        return f"parser {cls.name!r} reads no time to train"

    def describe_time_to_train(self) -> str:
        """What it looks for in a time-to-train case, for the message when a log has none of it."""
        return self.describe()


#: The log parsers, by name.
PARSERS: Registry[type[Parser]] = Registry(
    "parser", taken=lambda name, old, new: f"parser name {name!r} is empty or taken")


def register_parser(name_or_class: str | type[Parser], /) -> Any:
    """Register a parser class, in either of two forms (the first as ``register_model("name", ...)`` and
    ``register_command("name", ...)`` read):

    ``@register_parser("pytorch-wlm")`` on a :class:`Parser` subclass: it is the parser named so;
    ``@register_parser`` on one with a class attribute ``name``: it is the parser named ``cls.name``.

    Anything else is one ``ValueError`` naming the registering file and what to write.
    """
    where = os.path.abspath(sys._getframe(1).f_code.co_filename)  # the conftest (or module) registering it
    if isinstance(name_or_class, str):
        name = name_or_class

        def decorate(cls: type[Parser]) -> type[Parser]:
            if not (isinstance(cls, type) and issubclass(cls, Parser)):
                raise ValueError(_form(where, f"@register_parser({name!r}) decorates {cls!r}", name))
            if cls.name and cls.name != name:
                raise ValueError(f"{where}: @register_parser({name!r}) on class {cls.__name__}, whose name is "
                                 f"{cls.name!r}: give one name")
            cls.name = name
            return _add(where, cls)

        if not name:
            raise ValueError(_form(where, "register_parser('') has an empty name", "my-parser"))
        return decorate
    cls = name_or_class
    if not (isinstance(cls, type) and issubclass(cls, Parser)):
        raise ValueError(_form(where, f"register_parser({cls!r}) is given neither a name nor a Parser class",
                               "my-parser"))
    if not cls.name:
        raise ValueError(_form(where, f"@register_parser on class {cls.__name__}, which has no name", "my-parser"))
    return _add(where, cls)


def _form(where: str, what: str, name: str) -> str:
    return (f"{where}: {what}; write @register_parser({name!r}) above a class deriving from "
            f"pytest_dlperf.commands.Parser (or give the class name = {name!r} and write @register_parser)")


def _add(where: str, cls: type[Parser]) -> type[Parser]:
    try:
        return PARSERS.add(cls.name, cls)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def list_parsers() -> list[str]:
    return PARSERS.names()


def check(who: str, name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    try:
        parser = PARSERS.get(name)
    except ValueError as exc:
        raise ValueError(f"{who}: {exc}") from None
    return parser.check(who, options)


def make(name: str, options: Mapping[str, Any]) -> Parser:
    return PARSERS[name](**options)


def figure_problem(name: str, figure: str, options: Mapping[str, Any]) -> str | None:
    """Why parser ``name`` with ``options`` cannot read ``figure``, or None."""
    if figure not in FIGURES:
        return f"figure must be one of {', '.join(FIGURES)}, not {figure!r}"
    return PARSERS[name].figure_problem(figure, options)
