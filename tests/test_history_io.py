"""``dlperf history import`` and ``dlperf history export`` (issue 51): a store filled from the results files of
earlier nights, and its nights written out as CSV and JSON.

One real session (shared by the tests) writes a results file and appends itself to a store; the earlier nights are
copies of its results file, moved back in time, to another commit, at other figures."""

from __future__ import annotations

import copy
import csv
import datetime as _dt
import io
import json
import shutil
import statistics
from pathlib import Path

import jsonschema
import pytest

from pytest_dlperf import cli, jsonio
from pytest_dlperf.history import exchange
from pytest_dlperf.history.store import open_store
from tests.fixtures import tiny_case

SCHEMA = Path(__file__).resolve().parents[1] / "pytest_dlperf" / "schemas" / "history-export.schema.json"


@pytest.fixture
def night(shared_run):
    """The session: the tiny case against a baseline it beats, its results in r.json and its rows in live.db."""
    return shared_run("history-io", "--dlperf-model", "tiny", "--dlperf-batch-size", "32",
                      "--dlperf-baseline", "baseline.json", "--dlperf-history", "sqlite:///live.db",
                      "--dlperf-json", "r.json", setup=lambda d: d.baseline([tiny_case(1.0)]))


def results(night) -> dict:
    return json.loads((night.tester.path / "r.json").read_text())


def earlier(document: dict, days: int, commit: str, factor: float) -> dict:
    """The results of a night ``days`` before the session's, of another commit, its figures times ``factor``."""
    out = copy.deepcopy(document)
    created = _dt.datetime.fromisoformat(document["created"]) - _dt.timedelta(days=days)
    out["created"] = created.isoformat()
    out["environment"]["git"] = {"commit": commit * 40, "short": commit * 7, "dirty": False, "branch": "main",
                                 "root": None}
    for case in out["cases"]:
        case["throughput"] *= factor
    return out


def run_medians(case: dict) -> list[float]:
    """The figures of a case's runs: the median of each run's windows."""
    return [statistics.median(w["throughput"] for w in run["windows"]) for run in case["attempts"][-1]["runs"]]


def nightly_files(night, folder: Path, count: int = 6) -> list[str]:
    document = results(night)
    paths = []
    for i in range(count):
        path = folder / f"night{i}.json"
        path.write_text(json.dumps(earlier(document, count - i, "abcdef"[i % 6], 1 + 0.001 * i)))
        paths.append(str(path))
    return paths


def test_imported_files_are_the_nights_dlperf_history_reads_and_twice_adds_nothing(night, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    paths = nightly_files(night, tmp_path)
    assert cli.main(["history", "import", url, *paths]) == 0
    out = capsys.readouterr().out
    assert out.count(": imported 1 case(s) of the session of ") == 6, out
    assert out.strip().endswith(f"history import into {url}: 6 session(s) imported, 0 in it already")
    status = cli.main(["history", url])
    assert status in (0, 1)
    out = capsys.readouterr().out
    assert f"dlperf history {url}: 6 session(s), 1 case(s) on 1 machine class(es)" in out
    assert "tiny-fp32-bs32-gpu1 on " in out and "6 session(s), img/s" in out
    # Each night as the session wrote its own, at its file's time.
    (case,) = results(night)["cases"]
    with open_store(url) as store:
        points = store.points()
    assert [p.session.created for p in points] == [
        _dt.datetime.fromisoformat(json.loads(Path(p).read_text())["created"]).isoformat(timespec="microseconds")
        for p in paths]
    assert [p.case.throughput for p in points] == pytest.approx([case["throughput"] * (1 + 0.001 * i)
                                                                 for i in range(6)])
    assert points[0].session.git_commit == "a" * 40 and points[0].session.verdict_rules == results(night)[
        "verdict_rules"]
    assert points[0].case.runs == tuple(run_medians(case))
    assert points[0].case.verdict == case["verdict"] == "improved"
    assert points[0].case.tolerance == case["baseline"]["tolerance"] and points[0].case.baseline == 1.0
    # Twice: nothing more; the files are named as in the store already.
    assert cli.main(["history", "import", url, *paths[:3], paths[0]]) == 0
    out = capsys.readouterr().out
    assert out.count("is in the store already; not imported again") == 4
    assert "0 session(s) imported, 4 in it already" in out
    with open_store(url) as store:
        assert store.session_count() == 6


def test_a_sessions_own_file_is_in_its_store_and_an_imported_store_exports_its_nights(night, tmp_path, capsys):
    """The session appended itself to live.db; its results file is that session, and a store made by importing it
    exports the same night (but the session's id and time: the file's time, a moment before the live row's)."""
    live = f"sqlite:///{tmp_path / 'live.db'}"
    shutil.copy(night.tester.path / "live.db", tmp_path / "live.db")
    r_json = str(night.tester.path / "r.json")
    assert cli.main(["history", "import", live, r_json]) == 0
    assert "0 session(s) imported, 1 in it already" in capsys.readouterr().out
    imported = f"sqlite:///{tmp_path / 'imported.db'}"
    assert cli.main(["history", "import", imported, r_json]) == 0
    capsys.readouterr()
    exports = []
    for url in (live, imported):
        assert cli.main(["history", "export", url, "--json", "-"]) == 0
        exports.append(json.loads(capsys.readouterr().out)["nights"])
    (a,), (b,) = exports
    assert {k: v for k, v in a.items() if k not in ("session_id", "created")} == \
        {k: v for k, v in b.items() if k not in ("session_id", "created")}
    delay = _dt.datetime.fromisoformat(a["created"]) - _dt.datetime.fromisoformat(b["created"])
    assert 0 <= delay.total_seconds() <= exchange.SAME_SESSION_SECONDS


@pytest.mark.parametrize("field,value,where", [
    ("verdict", "splendid", "$.cases[0].verdict"),
    ("created", "last tuesday", "$.created"),
])
def test_a_bad_file_writes_nothing_and_names_the_file_and_the_field(night, tmp_path, capsys, field, value, where):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    good, other = nightly_files(night, tmp_path, 2)
    assert cli.main(["history", "import", url, good]) == 0
    bad = json.loads(Path(other).read_text())
    if field == "created":
        bad["created"] = value
    else:
        bad["cases"][0][field] = value
    Path(other).write_text(json.dumps(bad))
    fresh = earlier(results(night), 10, "f", 1.0)
    (tmp_path / "fresh.json").write_text(json.dumps(fresh))
    capsys.readouterr()
    assert cli.main(["history", "import", url, str(tmp_path / "fresh.json"), other]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"dlperf: {other}: {where}: "), line
    assert captured.out == ""
    with open_store(url) as store:
        assert store.session_count() == 1  # the good file of the same invocation is not written either
    assert cli.main(["history", "import", str(tmp_path / "new.db"), other]) == 2
    assert not (tmp_path / "new.db").exists()  # every file is read before the store is opened
    assert cli.main(["history", "import", str(tmp_path / "no" / "h.db"), good]) == 2
    assert "does not exist" in capsys.readouterr().err


#: The export's columns of text; the others hold numbers, true/false, or JSON (runs, case).
TEXT = {"machine", "case_id", "created", "session_id", "git_commit", "git_branch", "unit", "verdict", "message", "busy",
        "hostname", "gpu", "driver", "torch", "cuda", "cudnn", "nccl"}


def parsed(column: str, cell: str):
    """A CSV cell as the export's JSON has it: empty is null."""
    if cell == "":
        return None
    return cell if column in TEXT else json.loads(cell)


def test_export_csv_and_json_hold_every_night_and_the_json_is_its_schemas(night, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    paths = nightly_files(night, tmp_path)
    assert cli.main(["history", "import", url, *paths]) == 0
    capsys.readouterr()
    csv_path, json_path = tmp_path / "nights.csv", tmp_path / "nights.json"
    assert cli.main(["history", "export", url, "--csv", str(csv_path), "--json", str(json_path)]) == 0
    assert capsys.readouterr().out.count("night(s) of 1 case(s)") == 2
    document = json.loads(json_path.read_text())
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA.read_text()))
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    assert document["schema_version"] == 1 and document["kind"] == "dlperf-history-export"
    nights = document["nights"]
    rows = list(csv.reader(io.StringIO(csv_path.read_text())))
    assert rows[0] == document["columns"] == list(exchange.COLUMNS)
    assert [{k: parsed(k, v) for k, v in zip(rows[0], row)} for row in rows[1:]] == nights
    # The values of the files imported, night by night.
    sources = [json.loads(Path(p).read_text()) for p in paths]
    assert [n["throughput"] for n in nights] == [s["cases"][0]["throughput"] for s in sources]
    assert [n["git_commit"] for n in nights] == [s["environment"]["git"]["commit"] for s in sources]
    assert [n["created"][:19] for n in nights] == [s["created"][:19] for s in sources]
    first, case = nights[0], sources[0]["cases"][0]
    assert first["runs"] == run_medians(case) and first["unit"] == "img/s"
    assert (first["verdict"], first["tolerance"], first["verdict_rules"], first["case_id"]) == (
        "improved", case["baseline"]["tolerance"], sources[0]["verdict_rules"], "tiny-fp32-bs32-gpu1")
    assert first["case"] == case["case"] and first["on_trend"] is True
    # Selection, and stdout.
    assert cli.main(["history", "export", url, "--csv", "-", "--case", "resnet*"]) == 0
    assert capsys.readouterr().out.splitlines() == [",".join(exchange.COLUMNS)]
    assert cli.main(["history", "export", url, "--json", "-", "--machine", first["machine"].upper()[:5]]) == 0
    assert len(json.loads(capsys.readouterr().out)["nights"]) == 6
    # Trouble: no output asked for, a store that is not there, a folder in the output's place.
    assert cli.main(["history", "export", url]) == 2
    assert "give --csv FILE or --json FILE" in capsys.readouterr().err
    assert cli.main(["history", "export", str(tmp_path / "none.db"), "--csv", "-"]) == 2
    assert "no such history file" in capsys.readouterr().err and not (tmp_path / "none.db").exists()
    assert cli.main(["history", "export", url, "--json", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_the_export_schema_is_what_jsonio_checks_a_written_export_against(tmp_path):
    document = exchange.export_document("sqlite:///x.db", [])
    jsonio.validate(document, "history-export")
    broken = {**document, "nights": [{"machine": "m"}]}
    with pytest.raises(jsonio.DocumentError, match=r"\$\.nights\[0\]"):
        jsonio.dump(tmp_path / "x.json", broken, "history-export")
    assert not (tmp_path / "x.json").exists()


def test_an_ab_sessions_file_is_kept_apart_from_the_nights(night, tmp_path, capsys):
    document = results(night)
    environment = document["environment"]
    document["against"] = {"seed": 5, "reference": {"kind": "git", "given": "HEAD", "python": ["python"]},
                           "candidate_environment": environment, "reference_environment": environment,
                           "differences": []}
    (tmp_path / "ab.json").write_text(json.dumps(document))
    url = str(tmp_path / "h.db")
    assert cli.main(["history", "import", url, str(tmp_path / "ab.json"), str(night.tester.path / "r.json")]) == 0
    assert "an A/B session against git HEAD)" in capsys.readouterr().out
    with open_store(url) as store:
        (kept,), (plain,) = store.points(ab=True), store.points()
    assert kept.session.against == "git HEAD" and plain.session.against is None
    assert cli.main(["history", "export", url, "--json", "-"]) == 0
    assert [n["session_id"] for n in json.loads(capsys.readouterr().out)["nights"]] == [plain.session.id]


def test_import_into_postgresql(night, postgres_url, tmp_path, capsys):
    paths = nightly_files(night, tmp_path, 3)
    assert cli.main(["history", "import", postgres_url, *paths]) == 0
    assert cli.main(["history", "import", postgres_url, *paths]) == 0
    assert "0 session(s) imported, 3 in it already" in capsys.readouterr().out
    with open_store(postgres_url) as store:
        assert store.session_count() == 3 and len(store.points()) == 3
