"""Command cases: any training script as a case (``register_command``, a baseline entry's ``"command"``).

:mod:`.spec` (the command, its placeholders, registration), :mod:`.parsers` (a registry of named log
parsers; the built-ins ``dllogger``, ``mllog``, ``regex``, ``final`` in :mod:`.formats`, the trainers' in
:mod:`.trainers`), :mod:`.measure` (runs
through the launchers, logged steps into windows, the same run records as a built-in case)
and :mod:`.entries` (a baseline entry's ``"command"`` object).  docs/commands.md is the contract.
"""

from __future__ import annotations

from .entries import register_entries
from .parsers import Parser, Record, list_parsers, register_parser
from . import formats  # noqa: E402,F401  isort: skip  (the built-in parsers register themselves)
from . import trainers  # noqa: E402,F401  isort: skip  (and the trainers' named ones)
from .spec import CommandSpec, build_spec, case_problem, register_command

__all__ = ["CommandSpec", "Parser", "Record", "build_spec", "case_problem", "list_parsers", "register_command", "register_entries", "register_parser"]
