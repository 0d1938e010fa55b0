"""Real SLURM and OpenMPI on localhost, for tests of the distributed launchers.

Two session-scoped fixtures:

``slurm_cluster``
    A private one-node SLURM cluster: its own munged (own key and socket), slurmctld and
    slurmd on free ports, all state, spool, pid and log files in a private temporary folder.
    It never touches /etc/slurm, /etc/munge, /run/munge or a system slurm/munge that may be
    running. Yields a :class:`SlurmCluster`; pass ``cluster.env`` to any subprocess that calls
    ``srun``, ``salloc``, ``sbatch``, ``sinfo`` or ``scontrol``, or use ``cluster.run([...])``.

``mpirun``
    An :class:`Mpirun`: ``mpirun.argv(np)`` is the argv prefix that starts ``np`` ranks on
    localhost as root inside a container or VM, and ``mpirun.env`` the environment for it.

Both skip, with a reason that names the missing binary, when SLURM, munge or OpenMPI is
not installed (``.ci/install-cluster`` installs them from Debian's packages).

PYTEST_DONT_REWRITE: this module may be imported both as a plugin and by a test module, in
either order; its asserts carry their own messages.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "SLURM_BINARIES",
    "Mpirun",
    "SlurmCluster",
    "SlurmStartError",
    "clean_env",
    "free_port",
    "free_ports",
    "mpirun",
    "slurm_cluster",
    "which",
]

# Daemons live in /usr/sbin, which a non-login PATH may lack.
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "scontrol", "squeue", "scancel")
# Variables that would make srun/mpirun believe they run inside some other job or cluster.
_FOREIGN_PREFIXES = ("SLURM_", "SALLOC_", "SBATCH_", "SRUN_", "SQUEUE_", "SINFO_", "PMI_", "PMIX_",
                     "OMPI_", "PRTE_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")


def which(name: str) -> str | None:
    """``shutil.which`` that also looks in the sbin folders."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *_SBIN])
    return shutil.which(name, path=path)


def clean_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without SLURM/PMI/OpenMPI job variables.

    Tests may themselves run inside ``salloc`` or ``mpirun``; the launchers they start must
    not inherit that job's identity (srun would join a job the private cluster does not
    know, mpirun would launch its daemons through srun).
    """
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(_FOREIGN_PREFIXES)}
    env["PATH"] = os.pathsep.join([env.get("PATH", os.defpath), *_SBIN])
    env.update(extra)
    return env


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports that were free a moment ago (all held open together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<{path}: {exc}>"
    return "\n".join(text[-lines:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is gone as far as we are concerned.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pgid_members(pgid: int) -> list[int]:
    """Live pids in process group ``pgid`` (via /proc; empty where /proc is missing)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] = state, fields[2] = pgrp
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def _procs_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if text in cmd and _pid_alive(int(entry)):
            found.append((int(entry), cmd))
    return found


def _procs_of_cluster(conf: Path) -> dict[int, str]:
    """Live processes (pid -> command line) whose environment has ``SLURM_CONF=conf``.

    Every process of a private cluster carries it: the daemons are started with it, and
    slurmstepd (which double-forks into its own session, out of every process group of
    ours), srun, salloc and the tasks inherit it. A system SLURM's processes never do.
    """
    marker = f"SLURM_CONF={conf}".encode()
    found = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if _pid_alive(int(entry)):
            found[int(entry)] = cmd
    return found


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its process group, unless that group is ours (pytest's)."""
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), ()):
            out.append(child)
            todo.append(child)
    return out


def _terminate(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End a launcher started in its own session and everything under it.

    SIGTERM first: srun cancels its step, mpirun its ranks (which OpenMPI puts in process
    groups of their own); then SIGKILL to the group and to every descendant still there.
    """
    tree = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_pid_alive(p) for p in tree):
        time.sleep(0.05)
    for pid in [proc.pid, *tree]:
        if _pid_alive(pid):
            _kill_tree(pid)


def _run(argv: Sequence[str], env: Mapping[str, str], timeout: float, check: bool,
         **kw: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` in a new session, whose whole process group is killed on a timeout
    (mpirun's ranks, srun's helpers), failing with the output so far; ``check`` fails on a
    non-zero exit."""
    argv = list(argv)
    if kw.pop("capture_output", True):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    data = kw.pop("input", None)
    if data is None:
        kw.setdefault("stdin", subprocess.DEVNULL)
    else:
        kw["stdin"] = subprocess.PIPE
    with subprocess.Popen(argv, env=dict(env), start_new_session=True, **kw) as proc:
        try:
            out, err = proc.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            _terminate(proc)
            out, err = proc.communicate()
            raise AssertionError(f"{argv} timed out after {timeout} s\nstdout:\n{out}\nstderr:\n{err}") from None
    r = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} exited with {r.returncode}\nstdout:\n{out}\nstderr:\n{err}")
    return r


class SlurmStartError(RuntimeError):
    pass


class _Daemon:
    """A daemon run in the foreground, in its own session (so its process group can be killed)."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, env: Mapping[str, str]):
        self.name = name
        self.argv = list(argv)
        self.log = log  # the daemon's stdout/stderr
        self._out = open(log, "ab")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, env=dict(env), start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the daemon's process group, then SIGKILL whatever is left after ``timeout``."""
        pgid = self.proc.pid  # start_new_session: pgid == pid
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.proc.poll()
                if self.proc.returncode is not None and not _pgid_members(pgid):
                    break
                time.sleep(0.05)
            else:
                continue
            break
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        self._out.close()


class SlurmCluster:
    """A running private SLURM cluster on localhost.

    Attributes: ``root`` (its private folder), ``conf_path`` (slurm.conf), ``nodename``,
    ``cpus``, ``partition``, ``env`` (the environment for subprocesses: SLURM_CONF set, job
    variables of an enclosing job removed), ``ports`` (slurmctld, slurmd), ``munge_socket``.
    """

    partition = "debug"

    def __init__(self, root: Path, *, cpus: int | None = None, nodename: str | None = None,
                 start_timeout: float = 30.0):
        self.root = root
        # This machine's CPUs, but at least 2 so that two-rank tests run anywhere
        # (SlurmdParameters=config_overrides makes slurmd accept more than the hardware has).
        self.cpus = max(cpus or _cpu_count(), 2)
        self.nodename = nodename or _short_hostname()
        self.start_timeout = start_timeout
        self.conf_path = root / "etc" / "slurm.conf"
        self.munge_dir = root / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.munge_key = self.munge_dir / "munge.key"
        self.state_dir = root / "state"
        self.spool_dir = root / "spool"
        self.log_dir = root / "log"
        self.ctld_port, self.slurmd_port = free_ports(2)
        self.ports = (self.ctld_port, self.slurmd_port)
        self.cluster_name = f"dlperf{os.getpid()}p{self.ctld_port}"
        self._daemons: list[_Daemon] = []
        self.env = clean_env(SLURM_CONF=str(self.conf_path))

    # ----------------------------------------------------------------- configuration
    def slurm_conf(self) -> str:
        r = self.root
        return "\n".join([
            "# Generated by tests/cluster.py: a private one-node cluster on localhost.",
            f"ClusterName={self.cluster_name}",
            # "localhost" matches any host for the controller; slurmd and srun reach it on loopback.
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            # No cgroups: linuxproc tracks processes through /proc, task/none binds nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            # Take the node's CPUs and memory from this file, not from the hardware (CI VMs vary).
            "SlurmdParameters=config_overrides",
            "PropagateResourceLimits=NONE",
            "MailProg=/bin/true",
            # An empty SPANK stack: the system's plugins (/etc/slurm/plugstack.conf.d) stay out.
            f"PlugStackConfig={r / 'etc' / 'plugstack.conf'}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # Short timers: a test cluster comes and goes within seconds.
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "InactiveLimit=0",
            "KillWait=2",
            # SLURM's default: sbatch --wait reads the job's exit code from its record, so a record purged
            # before sbatch's next poll (they are seconds apart) made a failed night exit 0 once.
            "MinJobAge=300",
            "UnkillableStepTimeout=30",
            "SchedulerParameters=sched_interval=1,bf_interval=1",
            f"NodeName={self.nodename} NodeHostname={self.nodename} NodeAddr=127.0.0.1 "
            f"CPUs={self.cpus} Sockets=1 CoresPerSocket={self.cpus} ThreadsPerCore=1 RealMemory=1000 "
            "State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.nodename} Default=YES MaxTime=INFINITE State=UP",
            "",
        ])

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> SlurmCluster:
        for d in (self.conf_path.parent, self.munge_dir, self.state_dir, self.spool_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o700)
        # munged refuses a key that others can read, and insists on a 0700 socket folder.
        self.munge_key.write_bytes(os.urandom(1024))
        self.munge_key.chmod(0o400)
        self.conf_path.write_text(self.slurm_conf())
        (self.conf_path.parent / "plugstack.conf").write_text("")
        try:
            self._start_munged()
            self._start(["slurmctld", "-D", "-i", "-f", str(self.conf_path)], "slurmctld")
            self._wait(self._ctld_up, "slurmctld to answer `scontrol ping`")
            self._start(["slurmd", "-D", "-f", str(self.conf_path), "-N", self.nodename], "slurmd")
            self._wait(self._node_idle, f"node {self.nodename} to be idle in `sinfo`")
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def _start(self, argv: list[str], name: str) -> _Daemon:
        exe = which(argv[0])
        if exe is None:  # checked by the fixture already; be clear if used directly
            raise SlurmStartError(f"{argv[0]} not found")
        d = _Daemon(name, [exe, *argv[1:]], self.log_dir / f"{name}.out", self.env)
        self._daemons.append(d)
        return d

    def _start_munged(self) -> None:
        self._start(["munged", "--foreground", "--force",
                     f"--socket={self.munge_socket}", f"--key-file={self.munge_key}",
                     f"--pid-file={self.munge_dir / 'munged.pid'}",
                     f"--log-file={self.log_dir / 'munged.log'}",
                     f"--seed-file={self.munge_dir / 'munged.seed'}",
                     "--num-threads=2"], "munged")
        self._wait(self.munge_socket.exists, f"munged to create {self.munge_socket}")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for d in self._daemons:
                if not d.running():
                    raise SlurmStartError(f"{d.name} exited with {d.proc.returncode} while waiting for "
                                          f"{what}\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise SlurmStartError(f"timed out after {self.start_timeout:.0f} s waiting for {what}\n{self.logs()}")

    def _quiet(self, argv: list[str], timeout: float = 10) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            return None

    def _ctld_up(self) -> bool:
        r = self._quiet([which("scontrol") or "scontrol", "ping"], timeout=5)
        return r is not None and r.returncode == 0 and "UP" in r.stdout

    def node_state(self) -> str:
        r = self._quiet([which("sinfo") or "sinfo", "-h", "-n", self.nodename, "-o", "%t"], timeout=5)
        return r.stdout.strip() if r is not None and r.returncode == 0 else ""

    def _node_idle(self) -> bool:
        return self.node_state() == "idle"

    def _non_daemons(self) -> list[int]:
        """Processes of this cluster outside the daemons' own process groups (steps, tasks, sruns)."""
        groups = {d.pid for d in self._daemons}
        out = []
        for pid in _procs_of_cluster(self.conf_path):
            try:
                if os.getpgid(pid) not in groups:
                    out.append(pid)
            except ProcessLookupError:
                pass
        return out

    def stop(self, check: bool = True) -> None:
        """Cancel jobs, stop slurmd, slurmctld and munged, and (``check``) assert nothing is left.

        Anything still carrying this cluster's SLURM_CONF after that (a slurmstepd, a task, an
        srun a test left in the background) is killed, and with ``check`` reported.
        """
        if any(d.name == "slurmctld" and d.running() for d in self._daemons):
            self._quiet([which("scancel") or "scancel", "--full", "--quiet", f"--partition={self.partition}"],
                        timeout=5)
            # Let the steps end (KillWait=2) and slurmd reap them before it goes.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                q = self._quiet([which("squeue") or "squeue", "-h", "-o", "%i"], timeout=5)
                if q is None or q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.2)
            # slurmstepd, the tasks and srun exit a moment after the job leaves squeue.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self._non_daemons():
                time.sleep(0.1)
        for name in ("slurmd", "slurmctld", "munged"):
            for d in self._daemons:
                if d.name == name:
                    d.stop()
        left = _procs_of_cluster(self.conf_path)
        left.update(_procs_mentioning(str(self.root)))
        left.update({d.pid: f"{d.name} (pgid {d.pid})" for d in self._daemons if _pgid_members(d.pid)})
        for pid in left:
            _kill_tree(pid)
        if check:
            assert not left, "SLURM test cluster left processes behind (now killed):\n" + "\n".join(
                f"  pid {pid}: {cmd}" for pid, cmd in sorted(left.items()))

    # ----------------------------------------------------------------- helpers
    def logs(self, lines: int = 40) -> str:
        """The last ``lines`` lines of each daemon's log and captured output."""
        parts = []
        for p in sorted(self.log_dir.glob("*")):
            parts.append(f"----- {p.name} -----\n{_tail(p, lines)}")
        return "\n".join(parts)

    def run(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 60,
            check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` with this cluster's environment (plus ``env``); text output captured.

        Like ``subprocess.run`` (keyword arguments go to ``Popen``), but in its own session:
        on a timeout its whole process group is killed. With ``check`` (the default), a
        non-zero exit or a timeout fails with the command's output and the daemons' logs.
        """
        full_env = dict(self.env)
        full_env.update(env or {})
        try:
            return _run(cmd, full_env, timeout, check, **kw)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def __repr__(self) -> str:
        return f"SlurmCluster(node={self.nodename!r}, cpus={self.cpus}, conf={str(self.conf_path)!r})"


def _missing(names: Sequence[str]) -> list[str]:
    return [n for n in names if which(n) is None]


def _short_tmpdir(prefix: str) -> Path:
    """A private 0700 folder with a short path (munge's and slurmd's unix sockets need < 108 bytes)."""
    base = tempfile.gettempdir()
    if len(base) > 40 and os.path.isdir("/tmp"):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A private one-node SLURM cluster on localhost; skips when SLURM or munge is not installed."""
    missing = _missing(SLURM_BINARIES)
    if missing:
        pytest.skip(f"SLURM not installed: {', '.join(missing)} not found (run .ci/install-cluster)")
    if sys.platform != "linux":
        pytest.skip("the SLURM test cluster needs Linux")
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster runs slurmd as root (SlurmdUser=root); not root here")
    root = _short_tmpdir("slurm-")
    cluster = SlurmCluster(root)
    try:
        cluster.start()
    except SlurmStartError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start the SLURM test cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            if not os.environ.get("DLPERF_KEEP_SLURM_DIR"):
                shutil.rmtree(root, ignore_errors=True)


class Mpirun:
    """OpenMPI's ``mpirun`` on localhost, as root, in a container or VM.

    ``argv(np)`` is the prefix to put before the program; ``env`` is the environment for it
    (root allowed, TCP over loopback only, no job variables of an enclosing SLURM job, which
    would make mpirun start its daemons with srun).
    """

    # btl self,tcp: shared-memory transports (vader) and their single-copy mechanisms fail in
    # many containers; pml ob1: do not probe UCX; loopback only, so a VM's other interfaces
    # (and the network) are never used; no binding: a 2-core VM, ranks oversubscribed.
    MCA = {
        "btl": "self,tcp",
        "pml": "ob1",
        "btl_tcp_if_include": "lo",
        "oob_tcp_if_include": "lo",
        "plm": "isolated",
    }

    def __init__(self, exe: str):
        self.exe = exe
        self.env = clean_env(
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            # PMIx's shared-memory datastore breaks in some containers; the hash one does not.
            PMIX_MCA_gds="hash",
            OMPI_MCA_rmaps_base_oversubscribe="1",
        )

    def argv(self, np: int = 2) -> list[str]:
        argv = [self.exe, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(np)]
        for key, value in self.MCA.items():
            argv += ["--mca", key, value]
        return argv

    def run(self, cmd: Sequence[str], np: int = 2, *, env: Mapping[str, str] | None = None,
            timeout: float = 60, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        """``mpirun -np np ... cmd`` with ``self.env`` (plus ``env``); as :meth:`SlurmCluster.run`."""
        full_env = dict(self.env)
        full_env.update(env or {})
        return _run([*self.argv(np), *cmd], full_env, timeout, check, **kw)

    def __repr__(self) -> str:
        return f"Mpirun({self.exe!r})"


@pytest.fixture(scope="session")
def mpirun() -> Mpirun:
    """OpenMPI's mpirun for localhost; skips when it is not installed."""
    exe = which("mpirun")
    if exe is None:
        pytest.skip("OpenMPI not installed: mpirun not found (run .ci/install-cluster)")
    return Mpirun(exe)
