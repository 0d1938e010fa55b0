"""The built-in log parsers (:mod:`.parsers` is their interface and registry): ``dllogger`` (NVIDIA's DLLogger
lines), ``mllog`` (MLPerf's ``:::MLLOG`` events), ``regex`` (a pattern's named groups) and ``final`` (one
figure per run).  They register themselves when :mod:`pytest_dlperf.commands` is imported.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..models import UNITS
from .parsers import PHASES_ONLY, Mark, Milestone, Parser, Record, StepPhases, join_phases, register_parser


def number(value: Any) -> float | None:
    """A positive finite number from a logged value (``"1,234.5"``: thousands separated), else None."""
    try:
        number = float(value.replace(",", "") if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _json_after(line: str, prefix: str) -> Any:
    at = line.find(prefix)
    if at < 0:
        return None
    try:
        return json.loads(line[at + len(prefix):])
    except ValueError:
        return None


def seconds(value: Any) -> float | None:
    """A time in seconds from a logged value that may be 0 (a phase that took no time), else None."""
    if value == 0 and not isinstance(value, bool):
        return 0.0
    return number(value)


@register_parser
class DLLoggerParser(Parser):
    """DLLogger's JSON stream (``dllogger.JSONStreamBackend``: ``DLLL {"timestamp": ..., "type": "LOG", "step":
    [epoch, iteration], "data": {...}}``).  DeepLearningExamples' ConvNets trainer logs each step's
    ``train.total_ips`` on one line and, at verbosity 1, its ``train.data_time`` and ``train.compute_time`` (seconds:
    the wait for the batch, and the rest) on a second line of the same step
    (https://github.com/NVIDIA/DeepLearningExamples, ``PyTorch/Classification/ConvNets/image_classification/
    training.py`` and ``logger.py``): the step's phases ``data`` and ``compute`` (``data_time_key``,
    ``compute_time_key``; an empty key reads none)."""

    name = "dllogger"
    options: ClassVar[Mapping[str, Any]] = {"key": "train.total_ips", "time_key": None, "final_key": None,
                                            "time_to_train_key": None, "data_time_key": "train.data_time",
                                            "compute_time_key": "train.compute_time"}
    PREFIX = "DLLL "

    def parse_line(self, line: str) -> list[Record | Mark]:
        entry = _json_after(line, self.PREFIX)
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
            return []
        step, data = entry.get("step"), entry["data"]
        if isinstance(step, list) and not step:  # the run's summary
            return self._summary(data)
        if isinstance(step, bool) or not (isinstance(step, int) or (isinstance(step, list) and len(step) >= 2)):
            return []  # PARAMETER lines, epoch summaries ([epoch])
        index = step if isinstance(step, int) else step[-1]
        index = index if isinstance(index, int) else None
        phases = self._phases(data)
        if self.settings["time_key"]:
            time = number(data.get(self.settings["time_key"]))
            if time:
                return [Record(step_time=time, step=index, phases=phases)]
        else:
            figure = number(data.get(self.settings["key"]))
            if figure:
                return [Record(throughput=figure, step=index, phases=phases)]
        return [Record(step=index, kind=PHASES_ONLY, phases=phases)] if phases is not None else []

    def _summary(self, data: Mapping[str, Any]) -> list[Record | Mark]:
        found: list[Record | Mark] = []
        time = number(data.get(self.settings["time_to_train_key"])) if self.settings["time_to_train_key"] else None
        if time is not None:
            found.append(Mark(Milestone.TIME_TO_TRAIN, value=time))
        figure = number(data.get(self.settings["final_key"] or self.settings["key"]))
        return found + ([Record(throughput=figure, final=True)] if figure else [])

    def _phases(self, data: Mapping[str, Any]) -> StepPhases | None:
        """The step's phases its line gives (None: none; not the step's own time, ``time_key``)."""
        keys = {"data": self.settings["data_time_key"], "compute": self.settings["compute_time_key"]}
        found = StepPhases(**{name: seconds(data.get(key)) if key and key != self.settings["time_key"] else None
                              for name, key in keys.items()})
        return found if found.named() else None

    def finish(self, records: list[Record]) -> list[Record]:
        """The steps, each with the phases logged for it on a line of their own."""
        return join_phases(records)

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
            figure = number(value.get(self.settings["field"]) if isinstance(value, dict) else value)
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


#: Seconds in one of each unit a logged step time may be given in (``step_time_unit``).
TIME_UNITS = {"s": 1.0, "ms": 1e-3}
#: Rates that count steps, not samples (``throughput_unit``): a step's samples are ``samples_per_step``.
STEP_RATES = ("it/s", "s/it")
#: The groups of a ``regex`` pattern that give a step, each in the unit its name says: seconds per step
#: (``step_time``, in ``step_time_unit``), milliseconds per step, steps per second, seconds per step.
STEP_GROUPS = {"step_time_ms": lambda x: x / 1000.0, "it_per_s": lambda x: 1.0 / x, "s_per_it": lambda x: x}


@register_parser
class RegexParser(_PatternParser):
    """Named groups: ``throughput`` (in ``throughput_unit``: the case's unit, default; or ``it/s``, ``s/it``),
    ``step_time`` (in ``step_time_unit``: ``s``, default, or ``ms``), ``step_time_ms``, ``it_per_s``,
    ``s_per_it``; optional ``step``, ``rank``, ``samples``; or ``time_to_train`` (seconds), optional ``status``."""

    name = "regex"
    options: ClassVar[Mapping[str, Any]] = {"pattern": None, "step_time_unit": "s", "throughput_unit": None}
    groups = ("throughput", "step_time", *STEP_GROUPS, "time_to_train")

    @classmethod
    def check(cls, who: str, options: Mapping[str, Any]) -> dict[str, Any]:
        checked = super().check(who, options)
        if checked.get("step_time_unit", "s") not in TIME_UNITS:
            raise ValueError(f"{who}: step_time_unit must be one of {', '.join(TIME_UNITS)}, not "
                             f"{checked['step_time_unit']!r}")
        rates = (*STEP_RATES, *UNITS)
        if checked.get("throughput_unit") not in (None, *rates):
            raise ValueError(f"{who}: throughput_unit must be one of {', '.join(rates)} (it/s, s/it: steps, each of "
                             f"samples_per_step samples), not {checked['throughput_unit']!r}")
        return checked

    @classmethod
    def logged_unit(cls, options: Mapping[str, Any]) -> str | None:
        unit = options.get("throughput_unit")
        return unit if unit in UNITS else None

    def parse_line(self, line: str) -> list[Record | Mark]:
        match = self.pattern.search(line)
        if match is None:
            return []
        found = match.groupdict()
        seconds_to_train = number(found.get("time_to_train"))
        if seconds_to_train is not None:
            return [Mark(Milestone.TIME_TO_TRAIN, value=seconds_to_train, status=found.get("status"))]
        figure, seconds = number(found.get("throughput")), number(found.get("step_time"))
        if figure is not None and self.settings["throughput_unit"] in STEP_RATES:
            seconds, figure = (1.0 / figure if self.settings["throughput_unit"] == "it/s" else figure), None
        elif seconds is not None:
            seconds *= TIME_UNITS[self.settings["step_time_unit"]]
        for group, to_seconds in STEP_GROUPS.items():
            value = number(found.get(group))
            seconds = seconds if seconds is not None or value is None else to_seconds(value)
        if figure is None and seconds is None:
            return []
        whole = {k: int(v) for k, v in found.items() if k in ("step", "rank", "samples") and v and v.isdigit()}
        return [Record(throughput=figure, step_time=None if figure else seconds, **whole)]

    @classmethod
    def figure_problem(cls, figure: str, options: Mapping[str, Any]) -> str | None:
        groups = set(re.compile(options["pattern"]).groupindex)
        if figure == "time_to_train" and "time_to_train" not in groups:
            return f"pattern {options['pattern']!r} needs a named group (?P<time_to_train>...) (seconds)"
        steps = ("throughput", "step_time", *STEP_GROUPS)
        if figure == "throughput" and not groups & set(steps):
            return f"pattern {options['pattern']!r} needs a named group {' or '.join(f'(?P<{g}>...)' for g in steps)}"
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
        figure = number(match.group("throughput")) if match else None
        return [Record(throughput=figure, final=True)] if figure else []
