"""A side's runs started through the session's launcher: its interpreter in place of this one.

:class:`SideLauncher` wraps the session's :class:`~pytest_dlperf.launch.launchers.Launcher`: each plan it makes
runs the side's Python (:attr:`~.sides.Side.python`) where the launcher would run this one, with the side's
variables and working directory, and a fork server of the side's interpreter where the side has one
(``fork``: False for both sides where the reference cannot have one, so that both start their runs alike).  A
command case's ``{python}`` is the side's interpreter too.  Everything else is the wrapped launcher's.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path

from ..launch.launchers import Launcher, LaunchPlan
from .sides import THIS, Side


def swapped(words: list[str], python: tuple[str, ...]) -> list[str]:
    """``words`` with this interpreter replaced by ``python``: an argument that is it becomes ``python``'s words, one
    that contains it (a shell command line) gets ``python`` as one quoted command line."""
    out: list[str] = []
    for word in words:
        if word == sys.executable:
            out.extend(python)
        else:
            out.append(word.replace(sys.executable, shlex.join(python)) if sys.executable in word else word)
    return out


class SideLauncher(Launcher):
    """The session's launcher, starting ``side``'s interpreter; ``fork``: whether its runs may be forked."""

    def __init__(self, inner: Launcher, side: Side, fork: bool):
        super().__init__(inner.extra_args)
        self.inner, self.side, self.fork = inner, side, fork
        self.name = inner.name

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        side = self.side
        program = swapped(program, side.python) if program and side.kind != THIS else program
        plan = self.inner.plan(ranks, device, run_dir, program)
        command = plan.command if side.kind == THIS else swapped(plan.command, side.python)
        return dataclasses.replace(plan, command=command, env={**side.variables, **plan.env},
                                   fork=plan.fork if self.fork and side.forkable else None,
                                   python=None if side.kind == THIS else side.python[0], cwd=side.root)

    def with_env(self, plan: LaunchPlan, extra: dict[str, str]) -> LaunchPlan:
        return self.inner.with_env(plan, extra)

    def unavailable(self) -> str | None:
        return self.inner.unavailable()

    def reach(self, device: str, cuda_count: int) -> int | None:
        return self.inner.reach(device, cuda_count)

    def ranks_per_node(self, ranks: int) -> int:
        return self.inner.ranks_per_node(ranks)

    def rank_stderr(self, run_dir: Path, rank: int) -> Path | None:
        return self.inner.rank_stderr(run_dir, rank)

    def rank_stdout(self, run_dir: Path, rank: int) -> Path | None:
        return self.inner.rank_stdout(run_dir, rank)

    def failed_rank(self, stderr_text: str) -> tuple[int, int | None] | None:
        return self.inner.failed_rank(stderr_text)

    def explain(self, stderr_text: str) -> str | None:
        return self.inner.explain(stderr_text)
