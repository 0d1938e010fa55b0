"""A real PostgreSQL server on localhost, for the history store's tests.

``postgres_server`` (session scope) runs Debian's PostgreSQL binaries (``.ci/install-postgres``
installs them) on a cluster that ``initdb`` makes in a private temporary folder, listening on
a free port of 127.0.0.1 with trust authentication, and stops it at the end. PostgreSQL
refuses to run as root: as root, the cluster belongs to, and the server runs as, the
``postgres`` user that Debian's package creates. ``postgres_url`` (function scope) is a new,
empty database on it. Both skip, with the reason, where the binaries, the user or psycopg
are missing.

PYTEST_DONT_REWRITE: a plugin module; its asserts carry their own messages.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["postgres_server", "postgres_url"]


def _binaries() -> Path | None:
    """The folder of initdb, pg_ctl and postgres: Debian's newest, else the PATH's."""
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name),
                         reverse=True):
        if all(os.access(Path(folder) / b, os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    found = [shutil.which(b) for b in ("initdb", "pg_ctl", "postgres")]
    return Path(found[0]).resolve().parent if all(found) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a private PostgreSQL server's maintenance database (``postgres``), as user ``dlperf``."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (the history-postgres extra)")
    binaries = _binaries()
    if binaries is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not installed: "
                    "bash .ci/install-postgres installs Debian's postgresql package")
    user: dict = {}
    root = Path(tempfile.mkdtemp(prefix="dlperf-pg-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root)
            pytest.skip("running as root, and there is no postgres user to run PostgreSQL as")
        user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        os.chown(root, owner.pw_uid, owner.pw_gid)
        root.chmod(0o700)
    data, log = root / "data", root / "server.log"
    port = _free_port()

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(binaries / argv[0]), *argv[1:]], check=False, capture_output=True, text=True, timeout=120,
                              cwd=root, env={**os.environ, "LC_ALL": "C.UTF-8"}, **user)

    done = run("initdb", "-D", str(data), "-U", "dlperf", "--auth=trust", "-E", "UTF8", "--no-sync")
    assert done.returncode == 0, f"initdb failed: {done.stderr}"
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    done = run("pg_ctl", "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start")
    assert done.returncode == 0, f"pg_ctl start failed: {done.stderr}\n{log.read_text() if log.exists() else ''}"
    try:
        yield f"postgresql://dlperf@127.0.0.1:{port}/postgres"
    finally:
        run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A new, empty database on the private server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.rsplit("/", 1)[0] + "/" + name
