"""The entries of the option table (:data:`pytest_dlperf.options.OPTIONS`): an :class:`Option`, and a
:class:`Removed` option, whose flag stays only to say what replaced it."""

from __future__ import annotations

import dataclasses
from typing import Any

from .readers import Reader, text


@dataclasses.dataclass(frozen=True)
class Named:
    """What names an option: ``--dlperf-NAME`` on the command line, ``dlperf_NAME`` in the ini file."""

    name: str

    @property
    def flag(self) -> str:
        return f"--dlperf-{self.name}"

    @property
    def dest(self) -> str:
        """pytest's name of the command-line option, and of its ini twin."""
        return "dlperf_" + self.name.replace("-", "_")


@dataclasses.dataclass(frozen=True)
class Option(Named):
    """One ``--dlperf-NAME`` option: its help, how its value reads (:data:`Reader`), and its ini twin's type
    (``ini`` None: no twin, as for the output paths).  Its value is the :class:`Options` attribute ``field``
    (default: the name with ``_``)."""

    help: str
    metavar: str | None = None
    read: Reader = text()
    ini: str | None = "string"
    action: str | None = None  # "append": repeatable; "store_true": a switch
    field: str = ""
    cli: bool = True  # False: an ini setting only (dlperf_NAME, or -o dlperf_NAME=VALUE); its old flag is refused

    @property
    def attribute(self) -> str:
        return self.field or self.name.replace("-", "_")

    @property
    def label(self) -> str:
        """How messages name it: the flag, or the ini name of an ini setting."""
        return self.flag if self.cli else self.dest

    def refusal(self, value: Any) -> str:
        """The one line that the old flag of an ini setting gives."""
        shown = value[-1] if isinstance(value, list) and value else value
        return (f"{self.flag} is set in ini now: -o {self.dest}={shown if shown not in (None, True) else 'VALUE'} "
                f"or {self.dest} in pytest.ini (docs/options.md)")


@dataclasses.dataclass(frozen=True)
class Removed(Named):
    """A removed option: its flag (and its ini twin, ``ini`` its type) stay only to say what replaced it."""

    replacement: str
    metavar: str | None = None
    action: str | None = None
    ini: str | None = "string"

    def refusal(self, used: str) -> str:
        return f"{used} was removed: {self.replacement}"
