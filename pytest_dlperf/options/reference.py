"""The Markdown reference of every setting (``dlperf options``, docs/options.md), from the option table: the
command line's options, the ini settings and the removed options with what replaced each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .entries import Option, Removed


def cell(text: str) -> str:
    """A help text as a table cell: ``%%`` (argparse's) shown once, ``|`` escaped."""
    return text.replace("%%", "%").replace("|", chr(92) + "|")


def markdown(options: Sequence[Option], removed: Sequence[Removed]) -> str:
    """The page: a table of the command line, a table of the ini settings, a list of the removed options."""
    without = ", ".join(f"`{option.flag}`" for option in options if option.ini is None)
    lines = ["# Options", "",
             "Every setting of pytest-dlperf. This page is what `dlperf options` prints; a test keeps it so.", "",
             "## Command line", "",
             "What a nightly job or a person types; `pytest --help` lists them. Each has an ini twin, for "
             "`pytest.ini` or `[tool.pytest.ini_options]`: `--dlperf-NAME` is `dlperf_NAME`, but "
             f"{without}: a session's own outputs. The command line wins over the ini file.", "",
             "| option | meaning |", "|---|---|"]
    for option in options:
        if option.cli:
            shown = f"`{option.flag} {option.metavar}`" if option.metavar else f"`{option.flag}`"
            lines.append(f"| {shown} | {cell(option.help)} |")
    lines += ["", "## Ini settings", "",
              "Knobs set once per project: statistics, hardware, time limits. Set them in `pytest.ini` "
              "(`dlperf_save_span = off`) or `[tool.pytest.ini_options]`, or for one session with "
              "`-o dlperf_NAME=VALUE`. They have no `--dlperf-*` option: the old flag gives a usage error that "
              "says so.", "",
              "| ini | value | meaning |", "|---|---|---|"]
    for option in options:
        if not option.cli:
            lines.append(f"| `{option.dest}` | {cell(option.metavar or '-')} | {cell(option.help)} |")
    lines += ["", "## Removed options", "",
              "Each gives a usage error that names its replacement, on the command line and in the ini file.", ""]
    lines += [f"- `{entry.flag}`: {entry.replacement}." for entry in removed]
    return "\n".join(lines) + "\n"
