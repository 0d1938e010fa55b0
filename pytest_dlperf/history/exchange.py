"""``dlperf history import`` and ``dlperf history export``: a store filled from the results files of earlier nights,
and its nights written out as CSV or JSON.

Import makes a results file's rows as its session makes them at its end (:func:`.records.results_session_row` and
:func:`.records.case_rows` of the document's cases), its time the file's ``created``.  A file is the session
already stored when a session of the store has the same machine class, host, git commit and A/B reference and was
created at the file's ``created`` or in the :data:`SAME_SESSION_SECONDS` after it: one imported before (its time
is the file's), or the session that wrote the file and appended itself (its time a moment after the file's).  An
imported session's id is made of the same facts (a UUID 5), so that two imports racing on a PostgreSQL store cannot
both write it.  Every file is read and checked before the store is opened, and all are written in one transaction.

Export writes every night of every case (:meth:`.store.Store.points`; A/B sessions are no night), one record per
night with the columns of :data:`COLUMNS`: as CSV with a header row, or as the JSON document of
``schemas/history-export.schema.json``.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import io
import json
import math
import os
import sys
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from .. import jsonio
from ..atomic import check_output, write_atomic
from ..results.case import cases_from
from .records import CaseRow, Point, SessionRow, case_rows, results_session_row
from .store import store_for

#: How long after its results file's ``created`` a session that wrote itself may have recorded its own time.
SAME_SESSION_SECONDS = 10.0
EXPORT_KIND = "dlperf-history-export"
EXPORT_VERSION = 1
#: Where an exported night's value comes from: its session row or its case row (:mod:`.records`).
SESSION_COLUMNS = ("machine", "created", "session_id", "git_commit", "git_branch", "verdict_rules", "hostname", "gpu",
                   "gpu_count", "driver", "torch", "cuda", "cudnn", "nccl")
CASE_COLUMNS = ("case_id", "throughput", "time_to_target", "unit", "runs", "verdict", "decided", "on_trend",
                "baseline", "tolerance", "message", "busy", "busy_runs", "memory_gbs", "core_gflops",
                "scaling_efficiency", "mfu", "case")
#: The columns of an export, in order (CSV's header row; the keys of each JSON night).
COLUMNS = ("machine", "case_id", "created", "session_id", "git_commit", "git_branch", "throughput", "time_to_target",
           "unit", "runs", "verdict", "decided", "on_trend", "baseline", "tolerance", "verdict_rules", "message",
           "busy", "busy_runs", "memory_gbs", "core_gflops", "scaling_efficiency", "mfu", "hostname", "gpu",
           "gpu_count", "driver", "torch", "cuda", "cudnn", "nccl", "case")


@dataclasses.dataclass(frozen=True)
class ResultsFile:
    """A results file's session as its rows."""

    path: str
    session: SessionRow
    cases: list[CaseRow]

    def describe(self) -> str:
        commit = f", git {self.session.short_commit}" if self.session.git_commit else ""
        ab = f", an A/B session against {self.session.against}" if self.session.against else ""
        session = self.session
        return f"the session of {session.date} UTC on {session.machine} (host {session.hostname}{commit}{ab})"


# --------------------------------------------------------------------------- import


def read_results(path: str | os.PathLike) -> ResultsFile:
    """A results file (``--dlperf-json``) as the rows its session wrote; :class:`jsonio.DocumentError` naming the
    file and the field for one that cannot be read or is off-schema."""
    document = jsonio.load(path, "results")
    created = _parse_time(document["created"])
    if created is None:
        raise jsonio.DocumentError(path, "$.created", f"{document['created']!r} is not an ISO 8601 time")
    try:
        row = results_session_row(document, created=created)
        cases = case_rows(cases_from(document))
    except jsonio.DocumentError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # on-schema, yet not what a session writes
        raise jsonio.DocumentError(path, "$.cases", f"not a session's cases: {exc}") from None
    identity = "|".join(str(v) for v in (row.created, row.machine, row.hostname, row.git_commit, row.against))
    return ResultsFile(str(path), dataclasses.replace(row, id=uuid.uuid5(uuid.NAMESPACE_URL, identity).hex), cases)


def same_session(stored: SessionRow, new: SessionRow) -> bool:
    """Whether ``stored`` is the session of the results file ``new`` was read from (the module's rule)."""
    if (stored.machine, stored.hostname, stored.git_commit, stored.against) != \
            (new.machine, new.hostname, new.git_commit, new.against):
        return False
    then, now = _parse_time(stored.created), _parse_time(new.created)
    return then is not None and now is not None and 0 <= (then - now).total_seconds() <= SAME_SESSION_SECONDS


def import_files(url: str, paths: Sequence[str | os.PathLike]) -> tuple[str, list[tuple[ResultsFile, bool]]]:
    """Append the session of each results file to the store of ``url`` (created on first use), in one transaction,
    but those it holds already; every file is read and checked first.  Returns the store's URL (its password
    hidden) and each file with whether it was written."""
    found = [read_results(path) for path in paths]
    with store_for(url).open() as store:
        written = store.append_sessions([(f.session, f.cases) for f in found], unless=same_session)
    done = {id(session) for session in written}
    return store.url, [(f, id(f.session) in done) for f in found]


def _parse_time(text: Any) -> _dt.datetime | None:
    """An ISO 8601 time as an aware datetime (a time without a zone is UTC's), or None."""
    try:
        when = _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=_dt.timezone.utc)


# --------------------------------------------------------------------------- export


def night(point: Point) -> dict[str, Any]:
    """One night of one case as an export's record (:data:`COLUMNS`); a figure that is no finite number is null."""
    session, case = point.session, point.case
    values = {name: getattr(session, "id" if name == "session_id" else name) for name in SESSION_COLUMNS}
    values.update({name: getattr(case, name) for name in CASE_COLUMNS})
    values["runs"] = [_finite(v) for v in case.runs]
    values["case"] = dict(case.case)
    return {name: _finite(values[name]) for name in COLUMNS}


def export_document(url: str, points: Iterable[Point]) -> dict[str, Any]:
    """The JSON export (``schemas/history-export.schema.json``) of the nights ``points``."""
    return {"schema_version": EXPORT_VERSION, "kind": EXPORT_KIND, "store": url,
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "columns": list(COLUMNS), "nights": [night(p) for p in points]}


def csv_text(nights: Iterable[dict[str, Any]]) -> str:
    """CSV with a header row (:data:`COLUMNS`): null empty, true/false, runs and case as JSON."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([_cell(record[name]) for name in COLUMNS] for record in nights)
    return out.getvalue()


def write_export(target: str, text: str | None, document: dict[str, Any] | None = None) -> None:
    """Write an export to ``target`` (``-``: stdout): CSV ``text``, or the JSON ``document`` (schema-checked)."""
    if document is not None:
        if target == "-":
            jsonio.validate(document, "history-export", "<stdout>")
            sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
        else:
            jsonio.dump(target, document, "history-export")
        return
    if target == "-":
        sys.stdout.write(text or "")
        return
    check_output(target)
    write_atomic(target, text or "")


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return repr(value) if isinstance(value, float) else str(value)
