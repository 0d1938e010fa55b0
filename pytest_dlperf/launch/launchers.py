"""Launchers: how a case's ranks are started (``--dlperf-launcher``).

Every launcher starts ``python -m pytest_dlperf.worker SPEC`` once per rank; the worker
reads its rank from the launcher's variables (:mod:`pytest_dlperf.worker.distributed`).

``local`` (default)
    One rank: a single worker process.  N ranks: ``torch.distributed.run`` (torchrun) in
    standalone mode on this node, a rendezvous on a free port it picks itself, one rank per
    GPU (``LOCAL_RANK``), NCCL on GPUs and gloo on CPUs.
``torchrun``
    torchrun across nodes with a c10d rendezvous.  pytest runs on every node with the same
    arguments (as a ``mpirun`` or ``srun`` wrapper would start it); each starts its local
    agent; the node that gets global rank 0 measures, gates and reports; the others report
    their part and pass.
``slurm``
    pytest runs once inside an allocation (``salloc -N4 --gpus-per-node=8 pytest ...``);
    each case is one ``srun`` step across the allocation; ``MASTER_ADDR`` is the first node.
``mpi``
    ``mpirun`` starts the ranks; ``MASTER_ADDR`` is this host.

``--dlperf-launcher-args`` adds site-specific arguments to ``srun``/``mpirun``/``torchrun``.

A launcher is a :class:`Launcher` subclass registered under its ``name``
(:func:`register_launcher`); :func:`get_launcher` makes one by name.  Its :meth:`~Launcher.plan`
says how one run is started (a :class:`LaunchPlan`); :mod:`pytest_dlperf.launch.process` starts it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

from ..registry import Registry

WORKER = ["-m", "pytest_dlperf.worker"]
#: What each rank of a forked torchrun job runs (``--run-path``).
RANK_SCRIPT = str(Path(__file__).resolve().parents[1] / "worker" / "rank.py")
#: Variables every rank needs, wherever the launcher starts it.
FORWARDED = ("DLPERF_RUN_ID", "DLPERF_PARENT_PID", "DLPERF_PARENT_HOST", "PYTHONUNBUFFERED",
             "PYTHONPATH", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "GLIBC_TUNABLES")


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """How one run is started: the command line (before the spec path), the extra environment, whether the worker
    joins a process group (the spec's ``distributed``), the module and arguments a fork server runs instead where it
    can (``fork``), that server's interpreter (``python``) and the run's folder (``cwd``; None: this process's)."""

    command: list[str]
    env: dict[str, str]
    distributed: bool
    fork: tuple[str, ...] | None = None
    python: str | None = None
    cwd: str | None = None


def _torchrun_program(program: list[str] | None) -> list[str]:
    """What torchrun runs on each rank: our worker module, or ``program`` as it is (``--no-python``)."""
    return ["--no-python", *program] if program else list(WORKER)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


#: ``dlperf_malloc``: the workers' memory allocator settings.
MALLOC_MODES = ("steady", "system")
#: glibc's malloc, steady: never mmap a chunk (``mmap_max=0``: big tensors come from the heap) and never
#: return the heap's top to the system (``trim_threshold`` the largest size).  What training frees stays
#: in the process for the next step, so no step pays the page faults of fresh pages.
STEADY_MALLOC = {"glibc.malloc.mmap_max": "0", "glibc.malloc.trim_threshold": str(2 ** 64 - 1)}


def malloc_env(mode: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker gets for ``dlperf_malloc mode`` (``steady``: glibc's tunables; ``system``: none).

    Why steady is the default: glibc moves its mmap threshold as memory is freed, so whether a
    step's large tensors come from the heap or from fresh pages (zeroed by the kernel, a page
    fault each 4 KiB) depends on the order of a process's early allocations.  Measured on a
    2-core VM (``tiny`` fp32 bs32, one thread, 8 fresh processes each): 31,000 to 111,000 page
    faults per window of 30 steps and 1,400 to 2,800 img/s (CV 21% between processes); steady, 0
    to 1,000 faults and 2,900 to 3,800 img/s (CV 9%) (``benchmarks/machine_drift.py --faults``;
    README.md, "Where the spread between runs comes from").  Settings the environment already
    makes in ``GLIBC_TUNABLES`` are kept.  Other C libraries (musl, macOS) ignore the variable.
    """
    if mode == "system":
        return {}
    current = (os.environ if environ is None else environ).get("GLIBC_TUNABLES", "")
    given = {item.split("=", 1)[0] for item in current.split(":") if item}
    added = [f"{name}={value}" for name, value in STEADY_MALLOC.items() if name not in given]
    return {"GLIBC_TUNABLES": ":".join(filter(None, [current, *added]))} if added else {}


#: The launchers, by name, in the order they are documented.
LAUNCHER_CLASSES: Registry[type[Launcher]] = Registry(
    "launcher", taken=lambda name, old, new: f"a launcher named {name!r} is registered already ({old.__name__})")
_L = TypeVar("_L", bound="type[Launcher]")


def register_launcher(cls: _L) -> _L:
    """Class decorator: make ``cls`` the launcher ``get_launcher(cls.name)`` returns."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    LAUNCHER_CLASSES.add(cls.name, cls)
    return cls


class Launcher:
    name = ""

    def __init__(self, extra_args: list[str] | None = None):
        self.extra_args = list(extra_args or [])

    @classmethod
    def create(cls, extra_args: list[str] | None = None, **options) -> Launcher:
        """The launcher :func:`get_launcher` returns; ``options`` are the torchrun launcher's (ignored here)."""
        return cls(extra_args)

    def unavailable(self) -> str | None:
        """Why this launcher cannot run here (a skip reason), or None."""
        return None

    def reach(self, device: str, cuda_count: int) -> int | None:
        """How many ranks it can start (None: no limit it knows of)."""
        return cuda_count if device == "cuda" else None

    def ranks_per_node(self, ranks: int) -> int:
        """How many of a job's ``ranks`` share a node's CPUs (``dlperf_cpu_threads cores`` divides them)."""
        return ranks

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        """How to start a run of ``ranks`` ranks on ``device`` whose files go to ``run_dir``.

        ``program``: the command line each rank runs (an external training script, a command
        case: :mod:`pytest_dlperf.commands`) instead of our worker; the plan's command then
        ends with it, and no spec path is appended.  CPU ranks' thread count is no plan's: it reaches them
        through :meth:`with_env`, as the allocator's settings do (:mod:`pytest_dlperf.launch.threads`).
        """
        raise NotImplementedError

    def with_env(self, plan: LaunchPlan, extra: dict[str, str]) -> LaunchPlan:
        """``plan`` with ``extra`` variables for every rank (the plan's own win): they reach the ranks with
        the launcher's own environment (torchrun and srun pass it on; mpirun is told)."""
        return dataclasses.replace(plan, env={**extra, **plan.env}) if extra else plan

    def rank_stderr(self, run_dir: Path, rank: int) -> Path | None:
        return None

    def rank_stdout(self, run_dir: Path, rank: int) -> Path | None:
        """Rank ``rank``'s own stdout file, where the launcher keeps one per rank."""
        return None

    def failed_rank(self, stderr_text: str) -> tuple[int, int | None] | None:
        """(rank, exit status) of the first rank to fail, as the launcher reports it."""
        return None

    def explain(self, stderr_text: str) -> str | None:
        """A launcher-level failure (no rank ever ran), in words, or None."""
        return None


@register_launcher
class LocalLauncher(Launcher):
    name = "local"

    def __init__(self, extra_args=None, *, force_distributed: bool = False):
        super().__init__(extra_args)
        self.force_distributed = force_distributed

    def reach(self, device: str, cuda_count: int) -> int | None:
        """The visible GPUs, or for CPU ranks this node's CPUs: a rank per CPU at most."""
        return cuda_count if device == "cuda" else (os.cpu_count() or 1)

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        """One rank: our worker (forkable) or ``program``.  Several: torchrun; our worker's CPU ranks forkable too
        (torchrun forking them: ``--start-method fork``; GPU ranks start as ever until tests/gpu runs them so)."""
        if ranks == 1 and not self.force_distributed:
            return LaunchPlan(list(program) if program else [sys.executable, *WORKER], {}, distributed=False,
                              fork=None if program else (WORKER[1],))
        agent = ["--standalone", "--nnodes=1", f"--nproc-per-node={ranks}", *self._logs(run_dir), *self.extra_args]
        command = [sys.executable, "-m", "torch.distributed.run", *agent, *_torchrun_program(program)]
        fork = None if program or device != "cpu" else \
            ("torch.distributed.run", *agent, "--start-method=fork", "--run-path", RANK_SCRIPT)
        return LaunchPlan(command, {}, distributed=True, fork=fork)

    @staticmethod
    def _logs(run_dir: Path) -> list[str]:
        return [f"--log-dir={run_dir / 'ranks'}", "--redirects=3", "--monitor-interval=0.2"]

    def rank_stderr(self, run_dir: Path, rank: int) -> Path | None:
        found = sorted((run_dir / "ranks").glob(f"*/attempt_*/{rank}/stderr.log"))
        return found[-1] if found else None

    def rank_stdout(self, run_dir: Path, rank: int) -> Path | None:
        found = sorted((run_dir / "ranks").glob(f"*/attempt_*/{rank}/stdout.log"))
        return found[-1] if found else None

    _ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)

    def failed_rank(self, stderr_text: str) -> tuple[int, int | None] | None:
        marker = stderr_text.rfind("Root Cause")
        match = self._ROOT_CAUSE.search(stderr_text, marker if marker >= 0 else 0)
        return (int(match.group(1)), int(match.group(2))) if match else None


@register_launcher
class TorchrunLauncher(LocalLauncher):
    """torchrun on each of ``nnodes`` nodes, joined by a c10d rendezvous at ``endpoint``."""

    name = "torchrun"

    def __init__(self, extra_args=None, *, nnodes: int = 1, endpoint: str | None = None,
                 node_rank: int | None = None, rdzv_id: str = "dlperf", join_timeout: float = 120.0):
        super().__init__(extra_args)
        self.nnodes = nnodes
        self.endpoint = endpoint
        self.node_rank = node_rank if node_rank is not None else node_rank_from_env()
        self.rdzv_id = rdzv_id
        self.join_timeout = join_timeout
        self._runs = 0

    @classmethod
    def create(cls, extra_args: list[str] | None = None, **options) -> Launcher:
        return cls(extra_args, **options)

    def unavailable(self) -> str | None:
        if self.nnodes > 1 and not self.endpoint:
            return "the torchrun launcher across nodes needs --dlperf-rdzv-endpoint HOST:PORT"
        return None

    def reach(self, device: str, cuda_count: int) -> int | None:
        return (cuda_count if device == "cuda" else (os.cpu_count() or 1)) * self.nnodes

    def ranks_per_node(self, ranks: int) -> int:
        return max(1, ranks // self.nnodes)

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        if ranks % self.nnodes:
            raise ValueError(f"{ranks} ranks do not split evenly over {self.nnodes} nodes")
        per_node = ranks // self.nnodes
        self._runs += 1
        # Every node's pytest runs the same cases in the same order: the count names the job.
        rdzv = [f"--nnodes={self.nnodes}", f"--nproc-per-node={per_node}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={self.endpoint}", f"--rdzv-id={self.rdzv_id}-{self._runs}",
                f"--rdzv-conf=join_timeout={self.join_timeout:.0f},is_host={str(self.node_rank == 0).lower()}"]
        if self.nnodes == 1:
            rdzv = ["--standalone", "--nnodes=1", f"--nproc-per-node={per_node}"]
        command = [sys.executable, "-m", "torch.distributed.run", *rdzv, *self._logs(run_dir),
                   *self.extra_args, *_torchrun_program(program)]
        return LaunchPlan(command, {}, distributed=True)

    def explain(self, stderr_text: str) -> str | None:
        if "RendezvousTimeoutError" not in stderr_text:
            return None
        return (f"the rendezvous at {self.endpoint} timed out after {self.join_timeout:.0f} s: this node "
                f"(node rank {self.node_rank}) joined, not all {self.nnodes} nodes did; start pytest on every "
                f"node with the same arguments (dlperf_rdzv_timeout to wait longer)")


def node_rank_from_env(env=None) -> int:
    """This node's rank: explicit (``DLPERF_NODE_RANK``), SLURM's node id, or OpenMPI's rank."""
    env = os.environ if env is None else env
    for name in ("DLPERF_NODE_RANK", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "NODE_RANK"):
        if env.get(name, "").isdigit():
            return int(env[name])
    return 0


def _count(value: str | None) -> int | None:
    """SLURM counts such as ``8``, ``gpu:8`` or ``2(x4)``: the first number."""
    match = re.search(r"(\d+)", value or "")
    return int(match.group(1)) if match else None


@register_launcher
class SlurmLauncher(Launcher):
    name = "slurm"

    def unavailable(self) -> str | None:
        if not os.environ.get("SLURM_JOB_ID"):
            return "the slurm launcher runs inside an allocation: start pytest under salloc (SLURM_JOB_ID is not set)"
        if shutil.which("srun") is None:
            return "the slurm launcher needs srun on PATH"
        return None

    @property
    def nodes(self) -> int:
        return _count(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES")) or 1

    def gpus_per_node(self, cuda_count: int) -> int:
        return (_count(os.environ.get("SLURM_GPUS_ON_NODE")) or _count(os.environ.get("SLURM_GPUS_PER_NODE"))
                or cuda_count)

    def reach(self, device: str, cuda_count: int) -> int | None:
        if device == "cuda":
            return self.gpus_per_node(cuda_count) * self.nodes
        return _count(os.environ.get("SLURM_NTASKS"))

    def ranks_per_node(self, ranks: int) -> int:
        return math.ceil(ranks / self.nodes)

    def first_node(self) -> str:
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if nodelist:
            try:
                out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                                     text=True, timeout=30, check=True).stdout.split()
                if out:
                    return out[0]
            except (OSError, subprocess.SubprocessError):
                pass
        return socket.gethostname()

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        placement = [f"--ntasks={ranks}"]
        if device == "cuda":
            per_node = self.gpus_per_node(0) or ranks
            placement += [f"--nodes={math.ceil(ranks / per_node)}", f"--ntasks-per-node={min(ranks, per_node)}"]
        command = ["srun", *placement, "--kill-on-bad-exit=1", "--export=ALL",
                   f"--output={run_dir}/rank%t.stdout.log", f"--error={run_dir}/rank%t.stderr.log",
                   *self.extra_args, *(program or [sys.executable, *WORKER])]
        env = {"MASTER_ADDR": self.first_node(), "MASTER_PORT": str(free_port())}
        return LaunchPlan(command, env, distributed=ranks > 1)

    def rank_stderr(self, run_dir: Path, rank: int) -> Path | None:
        path = run_dir / f"rank{rank}.stderr.log"
        return path if path.exists() else None

    def rank_stdout(self, run_dir: Path, rank: int) -> Path | None:
        path = run_dir / f"rank{rank}.stdout.log"
        return path if path.exists() else None

    _TASK = re.compile(r"task (\d+): (?:Exited with exit code (\d+)|Killed|Terminated)")

    def failed_rank(self, stderr_text: str) -> tuple[int, int | None] | None:
        match = self._TASK.search(stderr_text)
        if not match:
            return None
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None


def _exports(names) -> list[str]:
    """mpirun's ``-x NAME`` for each name: pass the variable on to every rank."""
    return [arg for name in names for arg in ("-x", name)]


@register_launcher
class MpiLauncher(Launcher):
    name = "mpi"

    def unavailable(self) -> str | None:
        return None if shutil.which("mpirun") else "the mpi launcher needs mpirun on PATH"

    def plan(self, ranks: int, device: str, run_dir: Path, program: list[str] | None = None) -> LaunchPlan:
        env = {"MASTER_ADDR": socket.gethostname(), "MASTER_PORT": str(free_port())}
        if os.geteuid() == 0:  # containers run as root; OpenMPI refuses that unless told
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        exported = _exports(name for name in FORWARDED if name in os.environ or name in env)
        command = ["mpirun", "-np", str(ranks), *exported, "--output-filename", str(run_dir / "ranks"),
                   *self.extra_args, *(program or [sys.executable, *WORKER])]
        return LaunchPlan(command, env, distributed=ranks > 1)

    def with_env(self, plan: LaunchPlan, extra: dict[str, str]) -> LaunchPlan:
        # Right after the mpirun executable: mpirun takes its options in any order, whatever else the plan holds.
        exported = _exports(name for name in extra if name not in plan.command)
        return dataclasses.replace(super().with_env(plan, extra), command=[*plan.command[:1], *exported,
                                                                            *plan.command[1:]])

    def rank_stderr(self, run_dir: Path, rank: int) -> Path | None:
        found = sorted((run_dir / "ranks").glob(f"*/rank.{rank}/stderr"))
        return found[-1] if found else None

    def rank_stdout(self, run_dir: Path, rank: int) -> Path | None:
        found = sorted((run_dir / "ranks").glob(f"*/rank.{rank}/stdout"))
        return found[-1] if found else None

    _FIRST = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(-?\d+)")

    def failed_rank(self, stderr_text: str) -> tuple[int, int | None] | None:
        match = self._FIRST.search(stderr_text)
        return (int(match.group(1)), int(match.group(2))) if match else None


#: The built-in launchers' names, in the order they are documented.
LAUNCHERS = tuple(LAUNCHER_CLASSES)


def get_launcher(name: str, extra_args: list[str] | None = None, **torchrun) -> Launcher:
    """The launcher named ``name`` with ``extra_args``; ``torchrun`` options go to the torchrun launcher."""
    return LAUNCHER_CLASSES.get(name).create(extra_args, **torchrun)
