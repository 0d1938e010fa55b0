"""How an option's value is read: a :data:`Reader` takes what was :class:`Given` and returns the value, checked
(an :class:`~pytest_dlperf.cases.OptionError` naming the option), or its default where it was not given.
The option table (:data:`pytest_dlperf.options.OPTIONS`) names one for each option.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..cases import OptionError


@dataclasses.dataclass(frozen=True)
class Given:
    """An option's value as given (None: not given), and what a relative path in it is relative to."""

    flag: str  # --dlperf-foo
    value: Any
    base: Path  # the current folder for the command line, the ini file's folder for its twin
    root: Path  # pytest's rootdir


#: How an option's value is read: the value, checked (an :class:`OptionError` naming the option), or its default.
Reader = Callable[[Given], Any]


def text(default: str | None = None) -> Reader:
    return lambda given: default if given.value is None else str(given.value)


def switch(given: Given) -> bool:
    return bool(given.value)


def listed(parse: Callable[[str, Any], Any]) -> Reader:
    """A comma list (:mod:`pytest_dlperf.cases`' ``parse_*``)."""
    return lambda given: parse(given.flag, given.value)


def integer(minimum: int, default: int | None = None) -> Reader:
    def read(given: Given) -> int | None:
        if given.value is None:
            return default
        try:
            value = int(str(given.value))
        except ValueError:
            raise OptionError(f"{given.flag}: {given.value!r} is not an integer") from None
        if value < minimum:
            raise OptionError(f"{given.flag}: {value} is not allowed; expected an integer >= {minimum}")
        return value
    return read


def number(low: float, high: float | None = None, *, high_inclusive: bool = False, default: float | None = None,
           off: bool = False) -> Reader:
    """A number above ``low`` (and below ``high``); with ``off``, the word ``off`` reads as None."""
    def read(given: Given) -> float | None:
        raw = given.value
        if raw is None:
            return default
        if off and str(raw).strip().lower() == "off":
            return None
        try:
            value = float(str(raw))
        except ValueError:
            raise OptionError(f"{given.flag}: {raw!r} is not a number") from None
        below_high = high is None or value < high or (high_inclusive and value == high)
        if not (value > low and below_high):
            bound = f"between {low} and {high}" if high is not None else f"greater than {low}"
            raise OptionError(f"{given.flag}: {value} is not allowed; expected a number {bound}")
        return value
    return read


def choice(values: Sequence[str], default: str) -> Reader:
    def read(given: Given) -> str:
        value = default if given.value is None else str(given.value)
        if value not in values:
            raise OptionError(f"{given.flag}: {value!r} is not one of {', '.join(values)}")
        return value
    return read


def folder(given: Given) -> str | None:
    """A folder the workers read, as an absolute path (workers may run elsewhere)."""
    return str((given.base / os.path.expanduser(str(given.value))).resolve()) if given.value else None


def words(given: Given) -> list[str]:
    """One string, split like a shell."""
    try:
        return shlex.split(str(given.value or ""))
    except ValueError as exc:
        raise OptionError(f"{given.flag}: {exc}") from None


def endpoint(given: Given) -> str | None:
    if given.value and not re.fullmatch(r"[^:\s]+:\d+", str(given.value)):
        raise OptionError(f"{given.flag}: {given.value!r} is not HOST:PORT")
    return given.value


def record_folder(given: Given) -> str:
    return str(given.value or given.root / ".dlperf" / "baselines")


def plot_folder(given: Given) -> str | None:
    from ..reporting import plots

    if given.value and (missing := plots.missing_matplotlib()):
        raise OptionError(missing)
    return given.value


def memory_size(given: Given) -> int | None:
    from ..worker import memory

    try:
        return None if given.value is None else memory.parse_size(given.flag, given.value)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def cpu_threads(given: Given) -> int | str | None:
    """A positive integer or ``cores`` (:func:`pytest_dlperf.launch.threads.parse`)."""
    from ..launch.threads import parse

    return parse(given.flag, given.value)


def trusted_paths(given: Given) -> list[str]:
    """Files or folders whose baselines' commands may run (:mod:`pytest_dlperf.commands.trust`): their real paths,
    each relative to where it was given; a path that does not exist is an error (a typo would trust nothing)."""
    from ..commands.trust import real

    out = []
    for value in given.value or []:
        path = real(given.base / os.path.expanduser(str(value)))
        if not path.exists():
            raise OptionError(f"{given.flag}: {value}: no such file or folder; expected a baseline file or a folder "
                              "of them whose commands may run")
        out.append(str(path))
    return out
