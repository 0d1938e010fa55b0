"""A machine class the user names (``--dlperf-machine NAME``, as asv's ``machine.json``), not one inferred.

A baseline folder then judges against its file whose ``hardware`` says ``"machine": NAME``, else its file
``NAME.json``; else the file recorded under that name in the record folder (``dlperf_baseline_record``), else
none, and the cases' figures are recorded as ``NAME.json`` there.  Hardware is not matched (the user said which
machine this is); where the picked file's hardware is not this machine's, the session's header line warns.  The
name is also the machine class of the session's history rows and is kept in the results' environment.
:mod:`.machines` does the picking; this module reads the name and says what was picked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cases import OptionError

if TYPE_CHECKING:
    from .document import Baseline

#: What :mod:`.machines` hands in (it imports this module, so not the other way round): a ``Machine``, a
#: ``Selection`` and the option table's ``Given`` (an option's value as given).
Machine = Selection = Given = Any

FLAG = "--dlperf-machine"
#: A name is a file name: letters, digits, '.', '_' and '-', not starting with '.'.
NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def check(value: Any, flag: str = FLAG) -> str | None:
    """``value`` as a machine name (None: not given); raises :class:`OptionError` naming ``flag`` for a bad one."""
    if value is None:
        return None
    text = str(value)
    if not NAME.fullmatch(text) or len(text) > 100:
        raise OptionError(f"{flag}: {text!r} is not a machine name; expected 1 to 100 letters, digits, '.', '_' or "
                          "'-', not starting with '.' (it names a file, NAME.json)")
    return text


def machine_name(given: Given) -> str | None:
    """The option table's reader of ``--dlperf-machine`` (``dlperf_machine`` in the ini file)."""
    return check(given.value, given.flag)


def check_given(config: Any) -> None:
    """An empty ``--dlperf-machine ""`` reads as not given (:func:`pytest_dlperf.options.given`): refused here."""
    if config.getoption("dlperf_machine", None) == "":
        raise OptionError(f"{FLAG}: an empty name; expected letters, digits, '.', '_' or '-' (it names a file, "
                          "NAME.json), or no --dlperf-machine to infer the machine class from the hardware")


def find(files: Sequence[Baseline], name: str, where: str | Path) -> Baseline | None:
    """The file of ``files`` (a folder's) for machine ``name``: the one whose hardware says it, else ``NAME.json``.
    Raises :class:`OptionError` where several files say it."""
    saying = [b for b in files if b.hardware.get("machine") == name]
    if len(saying) > 1:
        names = ", ".join(Path(b.path).name for b in saying)
        raise OptionError(f'{FLAG}: {len(saying)} files of {where} say "machine": "{name}" ({names}); '
                          "expected one per machine")
    if saying:
        return saying[0]
    return next((b for b in files if Path(b.path).name == f"{name}.json"), None)


def pick(loaded: Sequence[Baseline], recorded: Sequence[Baseline], name: str, folder: str,
         record_dir: Path) -> tuple[Baseline | None, str, Path]:
    """The file of machine ``name`` (:func:`find`): the folder's (``loaded``), else the record folder's
    (``recorded``), else none; how (``named``, ``recorded``, ``none``) and where its figures are recorded."""
    chosen = find(loaded, name, folder)
    if chosen is not None:
        return chosen, "named", record_dir / f"{name}.json"
    chosen = find(recorded, name, record_dir)
    if chosen is not None:
        return chosen, "recorded", Path(chosen.path)
    return None, "none", record_dir / f"{name}.json"


def warning(machine: Machine, theirs: Machine | None) -> str:
    """The warning of a named file whose recorded hardware is not this machine's ('' where it is, or says none)."""
    why = machine.differs(theirs) if theirs is not None and (theirs.model or theirs.kind != machine.kind) else None
    if not why:
        return ""
    return (f"; warning: its hardware ({theirs.describe()}) is not this machine's ({machine.describe()}): {why}; "
            "judged against it as --dlperf-machine says")


def line(selection: Selection, theirs: Machine | None, shown) -> str:
    """The session's one line about the baseline of machine ``selection.name``: which file, or none and where its
    figures go."""
    name, chosen = selection.name, selection.chosen
    if selection.how == "none":
        return (f"no baseline for machine {name} ({FLAG}) in {selection.folder} (no file says \"machine\": "
                f"\"{name}\" or is {name}.json): the cases of {Path(selection.reference.path).name} run unjudged "
                f"and are recorded in {selection.recorded} for the next run")
    where = "the recorded file" if selection.how == "recorded" else "the file"
    return f"baseline {shown(chosen.path)}: {where} of machine {name} ({FLAG}){warning(selection.machine, theirs)}"


def missing_note(selection: Selection) -> str:
    """A case's note where no file of machine ``selection.name`` was found."""
    return (f"not judged: no baseline for machine {selection.name} in {selection.folder}; recorded in "
            f"{selection.recorded} for the next run")


def describe(document: dict[str, Any], selection: Selection) -> None:
    """A new recorded baseline of machine ``selection.name``: its name, its hardware's ``machine``, its notes."""
    name = selection.name
    document["name"] = f"{Path(selection.folder).name} on {name}"
    document["hardware"]["machine"] = name
    document["provenance"]["notes"] = (
        f"Recorded by pytest-dlperf: the cases of {selection.folder} measured on the machine named {name} "
        f"({FLAG}), of which the folder had no file. The next sessions of the folder with {FLAG} {name} gate "
        "against it; delete it to record anew.")
