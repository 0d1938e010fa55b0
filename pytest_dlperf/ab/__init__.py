"""A/B sessions (``--dlperf-against REF``): is the new stack slower?  The session's environment (the candidate)
against another (the reference), interleaved on one machine in one session, decided on paired ratios.

:mod:`.sides` (what REF names, whether it can run the worker), :mod:`.launcher` (a side's runs started with its
interpreter), :mod:`.kind` (a case's pairs and its record), :mod:`.report` (the headline, the environments'
differences, the report's section); the statistics are :mod:`pytest_dlperf.gate.paired`'s.  docs/ab.md.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .. import environment
from ..cases import OptionError
from ..gate.paired import draw_seed
from . import report, sides
from .sides import Side


@dataclasses.dataclass(frozen=True)
class AB:
    """An A/B session: its two sides, the seed of its pairs' orders, both environments and what differs."""

    candidate: Side
    reference: Side
    seed: int
    candidate_env: dict[str, Any]
    reference_env: dict[str, Any]
    reference_version: str | None
    forkable: bool  # both sides' runs forked by a server of their own (else both start fresh)
    differences: tuple[str, ...]
    #: Where the reference was chosen for the session, a line of the header (``--dlperf-against last-good``).
    chosen: str | None = None

    @property
    def stack(self) -> str:
        return report.stacks(self.candidate_env, self.reference_env)


def start(given: str, seed: int | None, rootdir: str | os.PathLike, fork_server: bool = True) -> AB:
    """The A/B session ``--dlperf-against given`` asks for, checked before any case runs: the reference parsed,
    a git revision checked out, its interpreter asked to import the worker.  Raises
    :class:`~pytest_dlperf.cases.OptionError` in one line (a worktree made is removed first)."""
    from .. import __version__

    reference = sides.checkout(sides.parse(given, rootdir))
    try:
        found = sides.probe(reference, rootdir)
        refused = sides.refusal(reference, found, __version__, sides.source_tree())
        if refused:
            raise OptionError(refused)
    except BaseException:
        sides.remove(reference)
        raise
    forkable = fork_server and reference.forkable
    mine = environment.collect(rootdir)
    theirs = found.get("environment") or {}
    return AB(sides.candidate(forkable), reference, draw_seed() if seed is None else seed, mine, theirs,
              found.get("version"), forkable, tuple(report.differences(mine, theirs, "cpu")))


def header_lines(ab: AB | None) -> list[str]:
    """pytest's header in an A/B session: the reference, the seed, the stacks and what differs."""
    if ab is None:
        return []
    how = "runs forked by a server of each side" if ab.forkable else "every run a fresh process"
    return [*([ab.chosen] if ab.chosen else []),
            f"dlperf: A/B against {ab.reference.describe()} ({ab.reference.kind}; seed {ab.seed}; {how}): {ab.stack}",
            "dlperf: what differs: " + ("; ".join(ab.differences) or "nothing the environment captures")]


def stop(ab: AB | None) -> None:
    """What the session made for its reference removed (a git revision's worktree)."""
    if ab is not None:
        sides.remove(ab.reference)
