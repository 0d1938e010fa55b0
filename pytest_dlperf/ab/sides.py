"""The two sides of an A/B session (``--dlperf-against REF``): what REF names, whether it can run the worker, and how
its runs start.

The session's own environment is the *candidate*; REF is the *reference* (:func:`parse`), one of:

* an **interpreter**: the path (or the name on ``PATH``) of another Python, a venv's or a conda env's; ``env
  NAME=VALUE ... PYTHON`` is one too, with those variables set for its runs.  Its runs are forked by a fork server
  of its own (:mod:`pytest_dlperf.launch.forkserver`), as the candidate's are by this interpreter's;
* a **command prefix** that starts one: ``docker run --gpus all --rm -v "$PWD:$PWD" -w "$PWD" IMAGE python``,
  ``srun ... python``, or a script that ends by ``exec``-ing one.  Its runs start fresh through it (a fork server
  cannot reach into it), and so do the candidate's, so that both sides start their runs alike.  The session's
  run folders must be visible at the same paths inside it (mount them);
* a **git revision** of the session's project (``HEAD~1``, ``v2.3``, a branch): checked out into a worktree in a
  temporary folder (removed at the end), this interpreter running it with the worktree first on ``PYTHONPATH``
  and as its working directory, a conftest model registered from the worktree's copy of its file.

:func:`probe` asks the reference, before any case runs, to import the worker and say its environment
(:func:`pytest_dlperf.environment.collect`); one line refuses a reference that cannot (:func:`refusal`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..cases import OptionError

INTERPRETER = "interpreter"
COMMAND = "command"
GIT = "git"
THIS = "this"
#: Seconds the reference may take to say its environment (a container's first start included).
PROBE_SECONDS = 300.0
#: What the worker imports, in the order the refusal names the first missing one.
WORKER_MODULES = ("torch", "psutil", "numpy", "pytest_dlperf")
#: Run in the reference by :func:`probe`: the modules it lacks, else its environment and pytest-dlperf's version.
PROBE = """
import importlib.util, json, sys
missing = [m for m in sys.argv[1].split(",") if importlib.util.find_spec(m) is None]
if missing:
    print(json.dumps({"missing": missing, "executable": sys.executable}))
    raise SystemExit(0)
import pytest_dlperf, pytest_dlperf.environment as env, pytest_dlperf.worker.main
print(json.dumps({"environment": env.collect(sys.argv[2] or None), "version": pytest_dlperf.__version__,
                  "executable": sys.executable}, default=str))
"""


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of an A/B session: how its interpreter starts (``python``, a command line), whether a fork server of
    its own can start its runs (``forkable``), the variables its runs get, and for a git revision the worktree that
    is its rootdir (``root``) standing for the session's (``project``)."""

    name: str  # "candidate" or "reference"
    kind: str  # THIS, INTERPRETER, COMMAND or GIT
    given: str  # what --dlperf-against said ("" for the candidate)
    python: tuple[str, ...]
    forkable: bool = True
    env: tuple[tuple[str, str], ...] = ()
    root: str | None = None
    project: str | None = None
    revision: str | None = None  # GIT: the commit REF names

    @property
    def variables(self) -> dict[str, str]:
        """What the side's runs get on top of this process's environment."""
        out = dict(self.env)
        if self.root is not None:
            out["PYTHONPATH"] = os.pathsep.join(filter(None, [self.root, os.environ.get("PYTHONPATH")]))
        return out

    def mapped(self, path: str | None) -> str | None:
        """``path`` (a model's file) as this side has it: under the worktree where it lies under the project."""
        if path is None or self.root is None or self.project is None:
            return path
        try:
            return str(Path(self.root) / Path(path).relative_to(self.project))
        except ValueError:
            return path

    def describe(self) -> str:
        """The side in a few words: ``/opt/venv/bin/python``, ``git HEAD~1 (3fa2c1e)``, ``docker run ... python``."""
        if self.kind == GIT:
            return f"git {self.given} ({(self.revision or '?')[:7]})"
        if self.kind == THIS:
            return sys.executable
        return self.given

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "given": self.given, "python": list(self.python), "forkable": self.forkable,
                "revision": self.revision}


def candidate(forkable: bool = True) -> Side:
    return Side("candidate", THIS, "", (sys.executable,), forkable)


def _git(root: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _is_script(path: str) -> bool:
    """A wrapper script (``#!``): it may set what a forked worker would not get, so it starts each run fresh."""
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def parse(text: str, rootdir: str | os.PathLike) -> Side:
    """The reference REF names (the module's kinds, in that order); a git revision is not checked out here
    (:func:`checkout`).  Raises :class:`~pytest_dlperf.cases.OptionError` in one line."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise OptionError(f"--dlperf-against: {text!r} does not split as a shell command line: {exc}") from None
    if not words:
        raise OptionError("--dlperf-against: empty; expected a Python interpreter, a command that starts one, "
                          "or a git revision")
    assignments = []
    if words[0] == "env":
        rest = words[1:]
        while rest and "=" in rest[0] and not rest[0].startswith("-"):
            assignments.append(tuple(rest.pop(0).split("=", 1)))
        words = rest if len(rest) == 1 else words
    if len(words) == 1:
        found = shutil.which(words[0]) if os.sep not in words[0] else words[0]
        if found and os.path.isfile(found) and os.access(found, os.X_OK):
            path = os.path.abspath(found)
            if _is_script(path):
                return Side("reference", COMMAND, text, (path,), False, tuple(assignments))
            return Side("reference", INTERPRETER, text, (path,), True, tuple(assignments))
        commit = _git(str(rootdir), "rev-parse", "--verify", "--quiet", f"{words[0]}^{{commit}}")
        if commit and not assignments:
            return Side("reference", GIT, text, (sys.executable,), True, revision=commit,
                        project=os.path.abspath(rootdir))
        raise OptionError(f"--dlperf-against: {text!r} is no executable file, no command on PATH and no git revision "
                          f"of {rootdir}; expected a Python interpreter (/opt/venv/bin/python), a command that starts "
                          "one ('docker run --rm IMAGE python') or a revision (HEAD~1)")
    if shutil.which(words[0]) is None:
        raise OptionError(f"--dlperf-against: {words[0]!r} (the first word of {text!r}) is not a command on PATH; "
                          "expected a command that starts a Python interpreter ('docker run --rm IMAGE python')")
    return Side("reference", COMMAND, text, tuple(words), False)


def checkout(side: Side) -> Side:
    """A git revision checked out (detached) into a worktree in a temporary folder: the side with its ``root``.
    The session's rootdir may lie below the repository's top: the worktree's folder of the same place is the root."""
    if side.kind != GIT:
        return side
    project = side.project or os.getcwd()
    top = _git(project, "rev-parse", "--show-toplevel")
    folder = tempfile.mkdtemp(prefix="dlperf-against-")
    done = subprocess.run(["git", "-C", project, "worktree", "add", "--detach", "--force", folder,
                           side.revision or side.given], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise OptionError(f"--dlperf-against: git worktree add of {side.given} failed: {last}")
    below = os.path.relpath(project, top) if top else "."
    return dataclasses.replace(side, root=os.path.normpath(os.path.join(folder, below)), python=(sys.executable,))


def remove(side: Side) -> None:
    """The worktree of a git revision removed (the folder, and git's note of it)."""
    if side.kind != GIT or side.root is None or side.project is None:
        return
    top = _git(side.root, "rev-parse", "--show-toplevel") or side.root
    _git(side.project, "worktree", "remove", "--force", top)
    shutil.rmtree(top, ignore_errors=True)
    _git(side.project, "worktree", "prune")


def probe(side: Side, rootdir: str | os.PathLike | None = None) -> dict[str, Any]:
    """What the side's interpreter says of itself (:data:`PROBE`): ``missing`` modules, or its ``environment``
    (the git facts of its root: a git revision's worktree, else ``rootdir``, the project both sides run) and
    pytest-dlperf's ``version``; ``error``: it could not run at all (the last line of its stderr)."""
    env = {**os.environ, **side.variables}
    root = side.root or (os.fspath(rootdir) if rootdir is not None else "")
    try:
        done = subprocess.run([*side.python, "-c", PROBE, ",".join(WORKER_MODULES), root],
                              capture_output=True, text=True, timeout=PROBE_SECONDS, env=env,
                              cwd=side.root or None, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc).splitlines()[0]}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"error": last}
    return json.loads(lines[-1])


def source_tree() -> str | None:
    """The checkout this session's pytest-dlperf runs from (a folder with its ``pyproject.toml``), or None (a wheel):
    pytest-dlperf is installed from a clone, not from PyPI."""
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / "pyproject.toml").is_file() and (root / "pytest_dlperf").is_dir() else None


def refusal(side: Side, found: dict[str, Any], version: str, source: str | None = None) -> str | None:
    """The one line that refuses a reference that cannot run the worker, naming the smallest install that makes it
    so (``--no-deps`` where pytest-dlperf alone is missing): from ``source`` (this session's checkout,
    :func:`source_tree`) where given, else ``pytest-dlperf==version``; None where it can."""
    where = f"--dlperf-against {side.given}"
    if "error" in found:
        return f"{where}: could not start its Python: {found['error']}"
    missing = found.get("missing")
    if not missing:
        return None
    python = found.get("executable") or shlex.join(side.python)
    package = shlex.quote(source) if source else f"pytest-dlperf=={version}"
    install = f"{package} --no-deps" if missing == ["pytest_dlperf"] else package
    return (f"{where}: cannot run the worker: {', '.join(missing)} not importable there; "
            f"install it there first: {python} -m pip install {install}")
