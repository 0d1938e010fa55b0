"""Log parsers: what a training script prints, as typed records of its steps (a name -> class registry).

Each parser reads one line at a time and returns the :class:`Record` s it finds there:

``dllogger``
    NVIDIA DLLogger's JSON stream, ``DLLL {"step": [epoch, iteration], "data": {...}}``
    (https://github.com/NVIDIA/dllogger).  ``key`` names a per-step throughput
    (default ``train.total_ips``, as DeepLearningExamples' ConvNets log it) or ``time_key``
    a per-step time in seconds; a line whose ``step`` is empty (``[]``, the run's summary)
    gives a final figure under ``final_key`` (default: ``key``), and a time to train under
    ``time_to_train_key`` (seconds).
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
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class Record:
    """One logged step (or, ``final``, a whole-run figure) as a parser read it."""

    throughput: float | None = None  # samples per second, as logged
    step_time: float | None = None  # seconds per step
    step: int | None = None
    rank: int | None = None
    samples: int | None = None  # samples of this step, where the line says
    final: bool = False
    #: What the step is, where a parser reads several kinds (``mllog``: ``key``, ``block``, ``epoch``).
    kind: str | None = None


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


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


class Parser:
    """A named log parser; ``options`` are its settings with their defaults (None: required)."""

    name: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}

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


_PARSERS: dict[str, type[Parser]] = {}


def register_parser(cls: type[Parser]) -> type[Parser]:
    """Class decorator: make ``cls`` the parser named ``cls.name``."""
    if not cls.name or cls.name in _PARSERS:
        raise ValueError(f"parser name {cls.name!r} is empty or taken")
    _PARSERS[cls.name] = cls
    return cls


def list_parsers() -> list[str]:
    return list(_PARSERS)


def check(who: str, name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    if name not in _PARSERS:
        raise ValueError(f"{who}: unknown parser {name!r}; expected one of {', '.join(_PARSERS)}")
    return _PARSERS[name].check(who, options)


def make(name: str, options: Mapping[str, Any]) -> Parser:
    return _PARSERS[name](**options)


def figure_problem(name: str, figure: str, options: Mapping[str, Any]) -> str | None:
    """Why parser ``name`` with ``options`` cannot read ``figure``, or None."""
    if figure not in FIGURES:
        return f"figure must be one of {', '.join(FIGURES)}, not {figure!r}"
    return _PARSERS[name].figure_problem(figure, options)


def _json_after(line: str, prefix: str) -> Any:
    at = line.find(prefix)
    if at < 0:
        return None
    try:
        return json.loads(line[at + len(prefix):])
    except ValueError:
        return None


@register_parser
class DLLoggerParser(Parser):
    name = "dllogger"
    options: ClassVar[Mapping[str, Any]] = {"key": "train.total_ips", "time_key": None, "final_key": None,
                                            "time_to_train_key": None}
    PREFIX = "DLLL "

    def parse_line(self, line: str) -> list[Record | Mark]:
        entry = _json_after(line, self.PREFIX)
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
            return []
        step, data = entry.get("step"), entry["data"]
        if isinstance(step, list) and not step:  # the run's summary
            found: list[Record | Mark] = []
            seconds = _number(data.get(self.settings["time_to_train_key"])) if self.settings["time_to_train_key"] \
                else None
            if seconds is not None:
                found.append(Mark(Milestone.TIME_TO_TRAIN, value=seconds))
            figure = _number(data.get(self.settings["final_key"] or self.settings["key"]))
            return found + ([Record(throughput=figure, final=True)] if figure else [])
        if isinstance(step, bool) or not (isinstance(step, int) or (isinstance(step, list) and len(step) >= 2)):
            return []  # PARAMETER lines, epoch summaries ([epoch])
        index = step if isinstance(step, int) else step[-1]
        index = index if isinstance(index, int) else None
        if self.settings["time_key"]:
            seconds = _number(data.get(self.settings["time_key"]))
            return [Record(step_time=seconds, step=index)] if seconds else []
        figure = _number(data.get(self.settings["key"]))
        return [Record(throughput=figure, step=index)] if figure else []

    def describe(self) -> str:
        what = f"time_key {self.settings['time_key']!r}" if self.settings["time_key"] else \
            f"key {self.settings['key']!r}"
        return f"'DLLL {{json}}' lines with a step [epoch, iteration] and {what} in their data"

    def describe_time_to_train(self) -> str:
        return f"a 'DLLL {{json}}' summary line (step []) with {self.settings['time_to_train_key']!r} in its data"

    @classmethod
    def figure_problem(cls, figure: str, options: Mapping[str, Any]) -> str | None:
        if figure == "time_to_train" and not options.get("time_to_train_key"):
            return "parser 'dllogger' reads a time to train from its summary line's time_to_train_key: give it"
        return None


def _ms(event: Mapping[str, Any]) -> float | None:
    """An MLLOG event's ``time_ms`` (milliseconds since the epoch), or None."""
    value = event.get("time_ms")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@register_parser
class MLLogParser(Parser):
    """MLPerf's events, as ``mlperf_logging.mllog`` logs them (its ``constants``: run_start, block_start, ...).

    One parser reads one rank's log from its start: it keeps the ``train_samples`` logged and
    each open block, so that the block's stop gives a step of known seconds and samples.
    """

    name = "mllog"
    #: ``samples``: what one block (or epoch) counts where its log says neither ``samples_count`` nor
    #: ``train_samples`` (an integer; a command's template such as ``{global_batch}`` is filled per run).
    options: ClassVar[Mapping[str, Any]] = {"key": "tracked_stats", "field": "throughput", "samples": None}
    PREFIX = ":::MLLOG "
    #: The interval events a logged step is read from, in the order they are preferred (a block holds epochs).
    INTERVALS = (("block", "block_start", "block_stop"), ("epoch", "epoch_start", "epoch_stop"))

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.train_samples: int | None = None  # samples of one epoch, as the script logs them
        self.global_batch: int | None = None
        self.samples_done = 0  # samples of the blocks (or epochs) that ended so far, where the log says them
        self._blocks = False  # the log has blocks: its epochs (inside them) are not counted
        self._open: dict[str, tuple[float, Mapping[str, Any]]] = {}  # kind -> (start time_ms, its metadata)

    def parse_line(self, line: str) -> list[Record | Mark]:
        event = _json_after(line, self.PREFIX)
        if not isinstance(event, dict) or not isinstance(event.get("key"), str):
            return []
        key, value = event["key"], event.get("value")
        meta = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        when = _ms(event)
        seconds = when / 1000.0 if when is not None else None
        if key == self.settings["key"]:
            figure = _number(value.get(self.settings["field"]) if isinstance(value, dict) else value)
            step = meta.get("step")
            return [Record(throughput=figure, step=_whole(step), kind="key")] if figure else []
        if key == "train_samples":
            self.train_samples = _whole(value) if _whole(value) and value > 0 else self.train_samples
        elif key == "global_batch_size":
            self.global_batch = _whole(value) if _whole(value) and value > 0 else self.global_batch
        elif key == "run_start":
            return [Mark(Milestone.RUN_START, time=seconds)]
        elif key == "run_stop":
            status = meta.get("status")
            return [Mark(Milestone.RUN_STOP, time=seconds, status=status if isinstance(status, str) else None)]
        elif key == "eval_accuracy":
            accuracy = value if isinstance(value, int | float) and not isinstance(value, bool) else None
            epoch = meta.get("epoch_num")
            count = _whole(meta.get("samples_count"))
            return [Mark(Milestone.EVAL, time=seconds, value=accuracy,
                         epoch=epoch if isinstance(epoch, int | float) and not isinstance(epoch, bool) else None,
                         samples=count if count is not None else self.samples_done)]
        for kind, opens, closes in self.INTERVALS:
            if key == opens and when is not None:
                self._open[kind] = (when, meta)
                self._blocks = self._blocks or kind == "block"
            elif key == closes and kind in self._open and when is not None:
                started, first = self._open.pop(kind)
                samples = self._samples(first, meta, kind)
                if samples and (kind == "block" or not self._blocks):
                    self.samples_done += samples
                if when > started:
                    return [Record(step_time=(when - started) / 1000.0, samples=samples,
                                   step=_whole(first.get("first_epoch_num", first.get("epoch_num"))), kind=kind)]
        return []

    def _samples(self, first: Mapping[str, Any], last: Mapping[str, Any], kind: str) -> int | None:
        """A block's samples: its running ``samples_count`` at stop less at start, else ``train_samples`` x its
        ``epoch_count`` (an epoch: 1); None where the log says neither."""
        began, ended = _whole(first.get("samples_count")), _whole(last.get("samples_count"))
        if began is not None and ended is not None and ended > began:
            return ended - began
        if self.train_samples is None:
            given = self.settings["samples"]
            return int(given) if given is not None else None
        count = first.get("epoch_count", 1) if kind == "block" else 1
        return round(self.train_samples * count) if isinstance(count, int | float) and count > 0 else None

    def finish(self, records: list[Record]) -> list[Record]:
        """The events of ``key`` where the log has them, else its blocks, else its epochs."""
        for kind in ("key", *(kind for kind, _, _ in self.INTERVALS)):
            chosen = [r for r in records if r.kind == kind]
            if chosen:
                return chosen
        return []

    def missing(self, records: list[Record]) -> str | None:
        if any(r.samples is None and r.throughput is None for r in records):
            return ("its blocks do not say how many samples they hold (no train_samples event, no samples_count in "
                    "their metadata): give the parser's samples option (an integer, or a template such as "
                    "'{global_batch}')")
        return None

    def describe(self) -> str:
        return (f"':::MLLOG {{json}}' events: block_start/block_stop (or epoch_start/epoch_stop) with their time_ms, "
                f"or key {self.settings['key']!r} with a figure in value.{self.settings['field']}")

    def describe_time_to_train(self) -> str:
        return "':::MLLOG {json}' events run_start and run_stop (with metadata.status)"

    @classmethod
    def figure_problem(cls, figure: str, options: Mapping[str, Any]) -> str | None:
        return None


class _PatternParser(Parser):
    required = ("pattern",)
    groups: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check(cls, who: str, options: Mapping[str, Any]) -> dict[str, Any]:
        checked = super().check(who, options)
        pattern = checked["pattern"]
        if not isinstance(pattern, str):
            raise ValueError(f"{who}: pattern must be a regular expression (a string), not {pattern!r}")  # noqa: TRY004 - a registration mistake, as all of them
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{who}: pattern {pattern!r} is not a regular expression: {exc}") from None
        if not set(compiled.groupindex) & set(cls.groups):
            raise ValueError(f"{who}: pattern {pattern!r} needs a named group "
                             f"{' or '.join(f'(?P<{g}>...)' for g in cls.groups)}")
        return checked

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.pattern = re.compile(self.settings["pattern"])

    def describe(self) -> str:
        return f"lines matching {self.pattern.pattern!r}"


@register_parser
class RegexParser(_PatternParser):
    name = "regex"
    options: ClassVar[Mapping[str, Any]] = {"pattern": None}
    groups = ("throughput", "step_time", "time_to_train")

    def parse_line(self, line: str) -> list[Record | Mark]:
        match = self.pattern.search(line)
        if match is None:
            return []
        found = match.groupdict()
        seconds_to_train = _number(found.get("time_to_train"))
        if seconds_to_train is not None:
            return [Mark(Milestone.TIME_TO_TRAIN, value=seconds_to_train, status=found.get("status"))]
        figure, seconds = _number(found.get("throughput")), _number(found.get("step_time"))
        if figure is None and seconds is None:
            return []
        whole = {k: int(v) for k, v in found.items() if k in ("step", "rank", "samples") and v and v.isdigit()}
        return [Record(throughput=figure, step_time=None if figure else seconds, **whole)]

    @classmethod
    def figure_problem(cls, figure: str, options: Mapping[str, Any]) -> str | None:
        groups = set(re.compile(options["pattern"]).groupindex)
        if figure == "time_to_train" and "time_to_train" not in groups:
            return f"pattern {options['pattern']!r} needs a named group (?P<time_to_train>...) (seconds)"
        if figure == "throughput" and not groups & {"throughput", "step_time"}:
            return f"pattern {options['pattern']!r} needs a named group (?P<throughput>...) or (?P<step_time>...)"
        return None

    def describe_time_to_train(self) -> str:
        return self.describe()


@register_parser
class FinalParser(_PatternParser):
    name = "final"
    options: ClassVar[Mapping[str, Any]] = {"pattern": None}
    groups = ("throughput",)

    def parse_line(self, line: str) -> list[Record | Mark]:
        match = self.pattern.search(line)
        figure = _number(match.group("throughput")) if match else None
        return [Record(throughput=figure, final=True)] if figure else []
