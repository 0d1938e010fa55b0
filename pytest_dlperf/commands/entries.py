"""Command cases given in a baseline: an entry's ``"command"`` object registers its model name as a command.

One entry of a model name gives the command for all of them (``amp`` and ``fp32``, 1 and 8
GPUs); another entry of the same name may repeat it exactly, or leave it out.
"""

from __future__ import annotations

import dataclasses

from collections.abc import Iterable, Mapping
from typing import Any

from ..models import registry
from .spec import build_spec

#: The command object's fields that are not ``build_spec`` keywords of the same name.
_RENAMED = {"argv": "command"}


def register_entries(entries: Iterable[tuple[Any, Mapping[str, Any], str]],
                     refused: Mapping[str, str] | None = None) -> None:
    """Register each ``(entry, command object, where)``; ``ValueError`` naming ``where`` for a mistake.

    ``where`` reads ``FILE: $.cases[3].command``; the command's source is the file, so that
    another file (or a conftest) that registers the same name is an error, not a silent override.
    ``refused``: model name -> the line that refuses its command (:func:`.trust.command_refusals`): registered
    all the same (checked, its cases collected), but never run.
    """
    refused = refused or {}
    given: dict[str, tuple[Mapping[str, Any], str]] = {}
    for entry, command, where in entries:
        name = entry.case.model
        if name in given:
            if given[name][0] != command:
                raise ValueError(f"{where}: model {name!r} has another command in {given[name][1]}; "
                                 f"give it once, or the same in every entry")
            continue
        given[name] = (command, where)
        fields = {_RENAMED.get(k, k): v for k, v in command.items()}
        source = where.split(": $.", 1)[0]
        try:
            spec = build_spec(name, source=source, unit=entry.unit,
                              batch_size=entry.case.batch_size if isinstance(entry.case.batch_size, int) else 32,
                              **fields)
            registry.add_spec(dataclasses.replace(spec, refused=refused.get(name)))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
