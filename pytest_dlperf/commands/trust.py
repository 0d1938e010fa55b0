"""Which baseline files may run the commands they give: a baseline is data, a command in it is code.

An entry's ``"command"`` object (its ``argv``, ``cwd`` and ``env``: an ``LD_PRELOAD`` or a
``PYTHONPATH`` in ``env`` is code too) is run only when the file it comes from is trusted:

1. the file's real path (symbolic links resolved, so a link inside the rootdir to a file outside
   it is outside) lies inside the session's rootdir, whose files are the project's own, reviewed
   and committed like its ``conftest.py``; or
2. the user named it, or a folder above its real path, with ``--dlperf-trust-commands PATH``
   (repeatable) or the ini key ``dlperf_trust_commands`` (one path a line, relative to the ini file).

Any other file's commands are refused before any case runs: one line per entry naming the file,
the entry and the option that would allow it (:meth:`Trust.refusal`), the case skipped with that
line, and the command never started (:func:`pytest_dlperf.commands.measure.execute` checks it
again); the file's figures still gate the cases that have no command of theirs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

OPTION = "--dlperf-trust-commands"
INI = "dlperf_trust_commands"


def real(path: str | os.PathLike) -> Path:
    """A path with every symbolic link resolved (the file a reader opens, wherever the link lies)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def project_root(config: Any) -> Path:
    """The rootdir as the session's test paths set it (its ini file's folder, ``--rootdir``), as real path.

    Not ``config.rootpath`` as such: pytest finds the rootdir before it knows a plugin's options, so the
    value of ``--dlperf-baseline /some/where/b.json`` (two arguments) counts as a test path, and the rootdir
    becomes a folder above the baseline (the common ancestor with the current folder, or the baseline's own).
    This asks pytest's own rule again with the test paths alone; the current folder where that fails.
    """
    import inspect

    from _pytest.config import findpaths  # the rule itself: no public API gives it

    given = {"inifile": config.option.inifilename, "override_ini": None, "args": [str(a) for a in config.args],
             "rootdir_cmd_arg": config.option.rootdir or None, "invocation_dir": config.invocation_params.dir}
    try:
        wanted = inspect.signature(findpaths.determine_setup).parameters
        root = findpaths.determine_setup(**{k: v for k, v in given.items() if k in wanted})[0]
    except Exception:  # noqa: BLE001 - another pytest's rule: the folder pytest ran in is the project
        root = config.invocation_params.dir
    return real(root)


@dataclasses.dataclass(frozen=True)
class Trust:
    """The rootdir and the paths the user trusts, all as real paths."""

    root: Path
    paths: tuple[Path, ...] = ()

    @classmethod
    def of(cls, root: str | os.PathLike, paths: Iterable[str | os.PathLike] = ()) -> Trust:
        return cls(real(root), tuple(real(p) for p in paths))

    def trusts(self, file: str | os.PathLike) -> bool:
        """Whether ``file``'s commands run: its real path lies inside the rootdir, or is (or lies under) a trusted
        path."""
        where = real(file)
        return any(_within(where, folder) for folder in (self.root, *self.paths))

    def refusal(self, file: str | os.PathLike, where: str) -> str | None:
        """The one line that refuses the command at ``where`` (``FILE: $.cases[3].command``), or None where
        ``file`` is trusted."""
        if self.trusts(file):
            return None
        actual = real(file)
        link = f" (a link to {actual})" if actual != Path(os.path.abspath(file)) else ""
        return (f"{where}: not run: a baseline's command is code, and this file{link} lies outside the rootdir "
                f"{self.root}; to run its commands, trust it: {OPTION} {actual} (or the ini key {INI})")


class RefusedCommand(PermissionError):
    """A command that a file not trusted gave, asked to start: its message is the line that refused it."""


def baseline_refusals(baseline: Any, trust: Trust) -> dict[str, str]:
    """:func:`command_refusals` of a loaded baseline (None: none): what the session's header prints before any case
    runs, and what collection registers as refused."""
    givers = baseline.command_givers() if baseline is not None else []
    return command_refusals(givers, trust) if givers else {}


def command_refusals(entries: Iterable[tuple[str, object, str, int]], trust: Trust) -> dict[str, str]:
    """Each model name whose command no trusted file gives, with the line that refuses it.

    ``entries``: ``(model, command object, file, index)`` of each baseline entry with a command. A model whose
    command (the same object: :func:`.entries.register_entries` refuses two) some trusted file gives runs.
    """
    lines: dict[str, list[str | None]] = {}
    for model, _command, file, index in entries:
        lines.setdefault(model, []).append(trust.refusal(file, f"{file}: $.cases[{index}].command"))
    return {model: found[0] for model, found in lines.items() if all(line is not None for line in found)}


def kept_note(document: dict[str, Any]) -> str:
    """What ``--dlperf-save-baseline`` says of the commands it writes (those the session ran), or ""."""
    given = sorted({case["model"] for case in document["cases"] if "command" in case})
    if not given:
        return ""
    return (f"; it keeps the command of {', '.join(given)}, which this session ran: a session runs it where it trusts "
            f"the file (inside its rootdir, or {OPTION})")
