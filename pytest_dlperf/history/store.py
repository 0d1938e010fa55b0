"""The history store: SQLite (embedded) or PostgreSQL (a fleet), one interface, a versioned schema.

:func:`open_store` takes ``--dlperf-history``'s URL and picks the store by its scheme from
:data:`STORES`: ``sqlite:///path`` or a plain path (stdlib :mod:`sqlite3`), ``postgresql://...``
(psycopg 3, the ``history-postgres`` extra).  The schema is created on first use in one
transaction and its version recorded in ``dlperf_meta``; a database of a newer schema is
refused with one line, never written.

Concurrent writers (two sessions, two machines) never corrupt or lose a row: a session's rows
go in one transaction.  SQLite runs in WAL mode with a busy timeout and takes the write lock
at ``BEGIN IMMEDIATE``; PostgreSQL's transactions do it by themselves, and the schema's
creation holds an advisory lock so that two first sessions do not race to create it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .records import CaseRow, Point, SessionRow

SCHEMA_VERSION = 8
#: What each version adds to the one before it, applied in order to an older store when it is opened.
MIGRATIONS = {
    2: ("ALTER TABLE dlperf_cases ADD COLUMN memory_gbs DOUBLE PRECISION",),  # the runs' memory probe, GB/s
    3: ("ALTER TABLE dlperf_cases ADD COLUMN core_gflops DOUBLE PRECISION",),  # the runs' core probe, GFLOP/s
    4: tuple(f"ALTER TABLE dlperf_cases ADD COLUMN {name} {kind}" for name, kind in (  # the night's verdict, why,
        ("message", "TEXT"), ("busy", "TEXT"), ("busy_runs", "INTEGER"),  # and the case's other figures
        ("scaling_efficiency", "DOUBLE PRECISION"), ("mfu", "DOUBLE PRECISION"),
        ("time_to_target", "DOUBLE PRECISION"))),
    5: ("ALTER TABLE dlperf_sessions ADD COLUMN against TEXT",),  # an A/B session's reference (--dlperf-against)
    6: ("ALTER TABLE dlperf_cases ADD COLUMN decided INTEGER",),  # whether its runs decided (1) or not (0)
    7: ("ALTER TABLE dlperf_sessions ADD COLUMN verdict_rules INTEGER",),  # the rules it was judged by
    8: ("ALTER TABLE dlperf_cases ADD COLUMN phases TEXT",),  # seconds per step of each phase, JSON
}
#: Seconds a writer waits for another's lock before it gives up (SQLite's busy timeout).
BUSY_TIMEOUT = 60.0

_SESSION_COLUMNS = ("id", "created", "machine", "hostname", "gpu", "gpu_count", "driver", "torch", "cuda",
                    "cudnn", "nccl", "git_commit", "git_branch", "environment", "against", "verdict_rules")
_CASE_COLUMNS = ("session_id", "case_id", "case_json", "unit", "throughput", "runs", "verdict", "baseline",
                 "tolerance", "memory_gbs", "core_gflops", "message", "busy", "busy_runs", "scaling_efficiency",
                 "mfu", "time_to_target", "decided", "phases")
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dlperf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ("CREATE TABLE IF NOT EXISTS dlperf_sessions (id TEXT PRIMARY KEY, created TEXT NOT NULL, "
     "machine TEXT NOT NULL, hostname TEXT, gpu TEXT, gpu_count INTEGER, driver TEXT, torch TEXT, cuda TEXT, "
          "cudnn TEXT, nccl TEXT, git_commit TEXT, git_branch TEXT, environment TEXT NOT NULL, against TEXT, "
     "verdict_rules INTEGER)"),
    ("CREATE TABLE IF NOT EXISTS dlperf_cases (session_id TEXT NOT NULL REFERENCES dlperf_sessions(id), "
     "case_id TEXT NOT NULL, case_json TEXT NOT NULL, unit TEXT, throughput DOUBLE PRECISION, runs TEXT NOT NULL, "
     "verdict TEXT NOT NULL, baseline DOUBLE PRECISION, tolerance DOUBLE PRECISION, memory_gbs DOUBLE PRECISION, "
     "core_gflops DOUBLE PRECISION, message TEXT, busy TEXT, busy_runs INTEGER, scaling_efficiency DOUBLE PRECISION, "
     "mfu DOUBLE PRECISION, time_to_target DOUBLE PRECISION, decided INTEGER, phases TEXT, "
     "PRIMARY KEY (session_id, case_id))"),
    "CREATE INDEX IF NOT EXISTS dlperf_sessions_machine ON dlperf_sessions (machine, created)",
    "CREATE INDEX IF NOT EXISTS dlperf_cases_case ON dlperf_cases (case_id)",
)
# The environment document stays in the store (for SQL of one's own): reading it back for every
# case of every session would cost more than the analysis needs.
_SELECT = ("SELECT " + ", ".join(f"s.{c}" if c != "environment" else "'{}'" for c in _SESSION_COLUMNS) + ", "
           + ", ".join(f"c.{c}" for c in _CASE_COLUMNS[1:])
           + " FROM dlperf_cases c JOIN dlperf_sessions s ON s.id = c.session_id")


class StoreError(OSError):
    """A store that cannot be opened, read or written; the message names the URL and the problem."""


def redact(url: str) -> str:
    """The URL without its password, for messages and the results document."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class Store:
    """A history database: append a session's rows, read the points of cases back."""

    placeholder = "?"

    def __init__(self, url: str):
        self.url = redact(url)
        self._conn: Any = None

    # -- what a store implements

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin_write(self) -> None:
        raise NotImplementedError

    def _lock_schema(self) -> None:
        """Serialize the schema's creation between first writers (within the open transaction)."""

    # -- the interface

    def open(self) -> Store:
        """Connect and create the schema on first use; refuse a database of a newer schema."""
        try:
            self._conn = self._connect()
            self._transaction(self._ensure_schema)
        except StoreError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001 - each driver has its own errors; one line names the store
            self.close()
            raise StoreError(f"{self.url}: {_first_line(exc)}") from None
        return self

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:  # noqa: PYI034 - a store of either kind
        return self if self._conn is not None else self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, session: SessionRow, cases: Sequence[CaseRow]) -> None:
        """Write a session and its cases in one transaction: all of them or none."""
        self.append_sessions([(session, cases)])

    def append_sessions(self, sessions: Sequence[tuple[SessionRow, Sequence[CaseRow]]], *,
                        unless: Callable[[SessionRow, SessionRow], bool] | None = None) -> list[SessionRow]:
        """Write sessions and their cases in one transaction: all of them or none.  With ``unless(stored, new)``,
        a session it holds for a session of its machine class already stored (or written before it here) is left
        out, under the write lock.  Returns the sessions written."""
        def write(cursor) -> list[SessionRow]:
            stored = self._sessions(cursor, {s.machine for s, _ in sessions}) if unless is not None else []
            written = []
            for session, cases in sessions:
                if unless is not None and any(unless(old, session) for old in stored):
                    continue
                cursor.execute(self._sql(f"INSERT INTO dlperf_sessions ({', '.join(_SESSION_COLUMNS)}) VALUES "
                                         f"({', '.join('?' * len(_SESSION_COLUMNS))})"), _session_values(session))
                sql = self._sql(f"INSERT INTO dlperf_cases ({', '.join(_CASE_COLUMNS)}) VALUES "
                                f"({', '.join('?' * len(_CASE_COLUMNS))})")
                cursor.executemany(sql, [_case_values(session.id, case) for case in cases])
                stored.append(session)
                written.append(session)
            return written

        return self._guarded(lambda: self._transaction(write, write_lock=True))

    def points(self, *, machine: str | None = None, case_ids: Iterable[str] | None = None,
               ab: bool = False) -> list[Point]:
        """The figures of the store, oldest first: of one machine class and some cases, or all; those of the
        nights (``ab`` False: an A/B session's are never a night of either side), or of the A/B sessions."""
        where, params = ["s.against IS NOT NULL" if ab else "s.against IS NULL"], []
        if machine is not None:
            where.append("s.machine = ?")
            params.append(machine)
        ids = None if case_ids is None else sorted(set(case_ids))
        if ids is not None:
            if not ids:
                return []
            where.append(f"c.case_id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY s.created, s.id, c.case_id"

        def read(cursor) -> list[Point]:
            cursor.execute(self._sql(sql), params)
            sessions: dict[tuple, SessionRow] = {}  # a session's row and a case's settings are read once each
            settings: dict[str, dict] = {}
            return [_point(row, sessions, settings) for row in cursor.fetchall()]

        return self._guarded(lambda: self._transaction(read))

    def session_count(self) -> int:
        def read(cursor) -> int:
            cursor.execute("SELECT COUNT(*) FROM dlperf_sessions")
            return int(cursor.fetchone()[0])

        return self._guarded(lambda: self._transaction(read))

    # -- inside

    def _sessions(self, cursor, machines: set[str]) -> list[SessionRow]:
        """The stored sessions of these machine classes, without their environment documents."""
        if not machines:
            return []
        columns = [c for c in _SESSION_COLUMNS if c != "environment"]
        cursor.execute(self._sql(f"SELECT {', '.join(columns)} FROM dlperf_sessions WHERE machine IN "
                                 f"({', '.join('?' * len(machines))})"), sorted(machines))
        return [SessionRow(**dict(zip(columns, row))) for row in cursor.fetchall()]

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _guarded(self, action: Callable[[], Any]) -> Any:
        if self._conn is None:
            self.open()
        try:
            return action()
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"{self.url}: {_first_line(exc)}") from None

    def _transaction(self, body: Callable[[Any], Any], write_lock: bool = False) -> Any:
        cursor = self._conn.cursor()
        try:
            if write_lock:
                self._begin_write()
            out = body(cursor)
            self._conn.commit()
            return out
        except BaseException:
            self._conn.rollback()
            raise
        finally:
            cursor.close()

    def _ensure_schema(self, cursor) -> None:
        self._begin_write()
        self._lock_schema()
        for statement in SCHEMA:
            cursor.execute(statement)
        cursor.execute(self._sql("SELECT value FROM dlperf_meta WHERE key = ?"), ("schema_version",))
        row = cursor.fetchone()
        if row is None:  # a new store: SCHEMA is this version's
            cursor.execute(self._sql("INSERT INTO dlperf_meta (key, value) VALUES (?, ?)"),
                           ("schema_version", str(SCHEMA_VERSION)))
            return
        found = int(row[0])
        if found > SCHEMA_VERSION:
            raise StoreError(f"{self.url}: history schema version {row[0]}, written by a newer pytest-dlperf; "
                             f"this one reads version {SCHEMA_VERSION}")
        if found < SCHEMA_VERSION:  # an older store: its tables brought up to date in this transaction
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    cursor.execute(statement)
            cursor.execute(self._sql("UPDATE dlperf_meta SET value = ? WHERE key = ?"),
                           (str(SCHEMA_VERSION), "schema_version"))


class SQLiteStore(Store):
    """One file on this machine: ``sqlite:///path/history.db``, ``sqlite:////abs/path`` or a plain path."""

    def __init__(self, url: str):
        super().__init__(url)
        self.path = sqlite_path(url)

    def _connect(self) -> sqlite3.Connection:
        if self.path.parent and not self.path.parent.is_dir():
            raise StoreError(f"{self.url}: the folder {self.path.parent} does not exist")
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")  # readers never block the writer, nor the writer them
        conn.execute("PRAGMA foreign_keys = ON")
        return _SQLiteConnection(conn)

    def _begin_write(self) -> None:
        self._conn.begin_immediate()


class _SQLiteConnection:
    """sqlite3 in autocommit mode, with explicit transactions: ``BEGIN IMMEDIATE`` takes the write lock
    up front, so two writers queue at the busy timeout instead of failing on a lock upgrade."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def cursor(self):
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
        return self.conn.cursor()

    def begin_immediate(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")  # the deferred BEGIN of cursor(): nothing was done in it
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()


class PostgresStore(Store):
    """A PostgreSQL database for a fleet of machines: ``postgresql://user@host:5432/dbname`` (psycopg 3).

    The password is best kept out of the URL: psycopg reads ``PGPASSWORD`` and ``~/.pgpass``.
    """

    placeholder = "%s"

    def __init__(self, url: str):
        super().__init__(url)
        self._raw_url = url

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError(f"{self.url}: a PostgreSQL history needs psycopg: pip install "
                             "'pytest-dlperf[history-postgres]'") from None
        return psycopg.connect(self._raw_url, connect_timeout=10, application_name="pytest-dlperf")

    def _begin_write(self) -> None:
        """psycopg opens a transaction at the first statement; nothing more is needed."""

    def _lock_schema(self) -> None:
        with self._conn.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (0x646C70657266,))  # "dlperf"


#: URL scheme -> store class (a plain path is SQLite).
STORES: dict[str, type[Store]] = {"sqlite": SQLiteStore, "postgresql": PostgresStore, "postgres": PostgresStore}


def sqlite_path(url: str) -> Path:
    """``sqlite:///rel/path`` -> ``rel/path``, ``sqlite:////abs`` -> ``/abs``, a plain path as it is."""
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        if rest.startswith("///"):
            rest = rest[3:]
        elif rest.startswith("//"):
            raise StoreError(f"{url}: a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path")
        return Path(os.path.expanduser(rest))
    return Path(os.path.expanduser(url))


def store_for(url: str) -> Store:
    """The store of a URL, not yet opened; :class:`StoreError` for a scheme no store reads."""
    if not url:
        raise StoreError("an empty history URL; give sqlite:///path, a path or postgresql://...")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if len(scheme) <= 1:  # a plain path (a Windows drive letter too)
        return SQLiteStore(url)
    kind = STORES.get(scheme)
    if kind is None:
        raise StoreError(f"{redact(url)}: unknown history URL scheme {scheme!r}; expected sqlite:///PATH, a "
                         f"path, or {', '.join(s + '://...' for s in STORES if s != 'sqlite')}")
    return kind(url)


def open_store(url: str) -> Store:
    """The store of a URL, connected, its schema created on first use."""
    return store_for(url).open()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _session_values(session: SessionRow) -> tuple:
    return (session.id, session.created, session.machine, session.hostname, session.gpu, session.gpu_count,
            session.driver, session.torch, session.cuda, session.cudnn, session.nccl, session.git_commit,
            session.git_branch, json.dumps(session.environment, sort_keys=True, default=str), session.against,
            session.verdict_rules)


def _case_values(session_id: str, case: CaseRow) -> tuple:
    return (session_id, case.case_id, json.dumps(case.case, sort_keys=True), case.unit, case.throughput,
            json.dumps(list(case.runs)), case.verdict, case.baseline, case.tolerance, case.memory_gbs,
            case.core_gflops, case.message, case.busy, case.busy_runs, case.scaling_efficiency, case.mfu,
            case.time_to_target, None if case.decided is None else int(case.decided),
            None if case.phases is None else json.dumps(dict(case.phases), sort_keys=True))


def _point(row: Sequence[Any], sessions: dict[tuple, SessionRow], settings: dict[str, dict]) -> Point:
    """A row of ``_SELECT`` as a Point; ``sessions`` and ``settings`` hold what earlier rows parsed (a session's
    row repeats for each of its cases, a case's settings for each of its nights: shared, never modified)."""
    n = len(_SESSION_COLUMNS)
    key = tuple(row[:n])
    session = sessions.get(key)
    if session is None:
        values = dict(zip(_SESSION_COLUMNS, key))
        values["environment"] = json.loads(values["environment"] or "{}")
        session = sessions[key] = SessionRow(**values)
    case = dict(zip(_CASE_COLUMNS[1:], row[n:]))
    text = case.pop("case_json")
    if text not in settings:
        settings[text] = json.loads(text)
    case["case"] = settings[text]
    case["runs"] = tuple(json.loads(case["runs"]))
    case["decided"] = None if case["decided"] is None else bool(case["decided"])
    case["phases"] = None if case["phases"] is None else json.loads(case["phases"])
    return Point(session, CaseRow(**case))
