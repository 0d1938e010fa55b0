"""Log parsers: what a training script prints, as typed records of its steps (a name -> class registry).

Each parser reads one line at a time and returns the :class:`Record` s it finds there:

``dllogger``
    NVIDIA DLLogger's JSON stream, ``DLLL {"step": [epoch, iteration], "data": {...}}``
    (https://github.com/NVIDIA/dllogger).  ``key`` names a per-step throughput
    (default ``train.total_ips``, as DeepLearningExamples' ConvNets log it) or ``time_key``
    a per-step time in seconds; a line whose ``step`` is empty (``[]``, the run's summary)
    gives a final figure under ``final_key`` (default: ``key``).
``mllog``
    MLPerf's ``:::MLLOG {"key": ..., "value": ..., "metadata": {...}}`` lines
    (https://github.com/mlcommons/logging).  Events of ``key`` (default ``tracked_stats``)
    carry the figure in ``value[field]`` (default ``throughput``) or as ``value`` itself;
    ``metadata.step`` is the step.
``regex``
    Any line a regular expression matches: named group ``throughput`` (samples per second)
    or ``step_time`` (seconds per step), optional ``step``, ``rank`` and ``samples``.
``final``
    One figure per run: ``pattern``'s group ``throughput`` on the last line it matches
    (a script that prints only its average, e.g. a transformers ``Trainer``'s
    ``train_samples_per_second``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
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

    def parse_line(self, line: str) -> list[Record]:
        raise NotImplementedError

    def describe(self) -> str:
        """What the parser looks for, for the message when a log has none of it."""
        raise NotImplementedError


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
    options: ClassVar[Mapping[str, Any]] = {"key": "train.total_ips", "time_key": None, "final_key": None}
    PREFIX = "DLLL "

    def parse_line(self, line: str) -> list[Record]:
        entry = _json_after(line, self.PREFIX)
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
            return []
        step, data = entry.get("step"), entry["data"]
        if isinstance(step, list) and not step:  # the run's summary
            figure = _number(data.get(self.settings["final_key"] or self.settings["key"]))
            return [Record(throughput=figure, final=True)] if figure else []
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


@register_parser
class MLLogParser(Parser):
    name = "mllog"
    options: ClassVar[Mapping[str, Any]] = {"key": "tracked_stats", "field": "throughput"}
    PREFIX = ":::MLLOG "

    def parse_line(self, line: str) -> list[Record]:
        event = _json_after(line, self.PREFIX)
        if not isinstance(event, dict) or event.get("key") != self.settings["key"]:
            return []
        value = event.get("value")
        figure = _number(value.get(self.settings["field"]) if isinstance(value, dict) else value)
        if figure is None:
            return []
        meta = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        step = meta.get("step")
        return [Record(throughput=figure, step=step if isinstance(step, int) else None)]

    def describe(self) -> str:
        return (f"':::MLLOG {{json}}' events with key {self.settings['key']!r} and a figure in "
                f"value.{self.settings['field']}")


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
    groups = ("throughput", "step_time")

    def parse_line(self, line: str) -> list[Record]:
        match = self.pattern.search(line)
        if match is None:
            return []
        found = match.groupdict()
        figure, seconds = _number(found.get("throughput")), _number(found.get("step_time"))
        if figure is None and seconds is None:
            return []
        whole = {k: int(v) for k, v in found.items() if k in ("step", "rank", "samples") and v and v.isdigit()}
        return [Record(throughput=figure, step_time=None if figure else seconds, **whole)]


@register_parser
class FinalParser(_PatternParser):
    name = "final"
    options: ClassVar[Mapping[str, Any]] = {"pattern": None}
    groups = ("throughput",)

    def parse_line(self, line: str) -> list[Record]:
        match = self.pattern.search(line)
        figure = _number(match.group("throughput")) if match else None
        return [Record(throughput=figure, final=True)] if figure else []
