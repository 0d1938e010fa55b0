"""The nightly history: the SQLite and PostgreSQL stores, change points, the gate, ``dlperf history``,
and one real session that writes history, is judged against it and is gated by it."""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import markupsafe
import numpy as np
import pytest

from pytest_dlperf import cli, environment
from pytest_dlperf.controller import history as hooks
from pytest_dlperf.history import analysis, changepoints
from pytest_dlperf.history.records import CaseRow, SessionRow, machine_class
from pytest_dlperf.history.store import MIGRATIONS, SCHEMA_VERSION, StoreError, open_store, store_for

MACHINE = "AMD EPYC, 2 CPUs"
CASE = {"model": "resnet50", "precision": "amp", "batch_size": 256, "gpus": 8, "settings": {}}
START = _dt.datetime(2026, 10, 1, 2, 0, tzinfo=_dt.timezone.utc)


def synthetic(kind: str, seed: int = 3, count: int = 40) -> np.ndarray:
    """40 nightly figures around 5000: flat, a 6% step down at session 25 (noise 2%), or a 3% drift
    down over sessions 20-39 (noise 0.5%, so that no figure crosses a 5% tolerance)."""
    rng = np.random.default_rng(seed)
    level = np.ones(count)
    noise = 0.02
    if kind == "step":
        level[25:] *= 0.94
    elif kind == "drift":
        level[20:] = 1 - 0.03 * np.arange(1, count - 19) / 20
        noise = 0.005
    return 5000 * level * (1 + noise * rng.standard_normal(count))


def write_sessions(url: str, figures, *, torch_at: int | None = None, case_id: str = "resnet50-amp-bs256-gpu8",
                   machine: str = MACHINE, start: int = 0) -> None:
    with open_store(url) as store:
        for i, figure in enumerate(figures, start):
            new = torch_at is not None and i >= torch_at
            session = SessionRow(id=f"s{i:03d}-{machine[:3]}", created=(START + _dt.timedelta(days=i)).isoformat(
                timespec="microseconds"), machine=machine, hostname="node1", torch="2.14.1" if new else "2.13.0",
                git_commit=("9b04d7e" if new else "3fa2c1e") + "0" * 33, git_branch="main",
                environment={"host": {"hostname": "node1"}})
            runs = (float(figure) * 0.99, float(figure), float(figure) * 1.01)
            store.append(session, [CaseRow(case_id, CASE, "img/s", float(figure), runs, "pass")])


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.mark.parametrize("kind", ["step", "none", "drift"])
def test_history_finds_the_step_its_size_and_what_changed(store_url, kind, capsys):
    figures = synthetic(kind)
    write_sessions(store_url, figures, torch_at=25 if kind == "step" else None)
    status = cli.main(["history", store_url])
    out = capsys.readouterr().out
    assert status == 0, out  # no step starts at the newest figures
    with open_store(store_url) as store:
        (history,) = [analysis.analyze(group) for _, group in sorted(analysis.series(store.points()).items())]
    assert len(history.points) == 40
    if kind == "none":
        assert history.change_points == () and "no change point" in out
        return
    if kind == "drift":
        assert min(figures[20:]) > 5000 * 0.95 and min(figures[20:]) > np.median(figures[:20]) * 0.95
        # Reported as a change, not missed: a downward change point, and the drift since it or over the series.
        assert history.change_points and all(p.step.down for p in history.change_points), out
        assert "change point at session" in out
        return
    (point,) = [p for p in history.change_points if abs(p.step.change) > 0.03]
    assert abs(point.step.index - 25) <= 1, out
    true = figures[25:].mean() / figures[:25].mean() - 1
    assert abs(point.step.change - (-0.06)) <= 0.02 and point.step.low < true < point.step.high, out
    assert "torch 2.13.0 -> 2.14.1" in point.changes and "git 3fa2c1e..9b04d7e" in point.changes
    assert "torch 2.13.0 -> 2.14.1" in out and "git 3fa2c1e..9b04d7e" in out and "change point at session 2" in out


WRITER = textwrap.dedent("""
    import datetime, sys, time
    from pathlib import Path
    from pytest_dlperf.history.records import CaseRow, SessionRow
    from pytest_dlperf.history.store import open_store
    url, name, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.01)
    for i in range(40):
        with open_store(url) as store:
            now = datetime.datetime.now(datetime.timezone.utc).isoformat()
            store.append(SessionRow(id=f"{name}-{i}", created=now, machine="m"),
                         [CaseRow(f"case{j}", {}, "img/s", 100.0 + j, (100.0,), "pass") for j in range(5)])
""")


def test_two_concurrent_writers_lose_nothing(store_url, tmp_path):
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    open_store(store_url).close()  # the first session's schema; the writers race on rows
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, name, str(go)], env=env,
                                stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    with open_store(store_url) as store:
        assert store.session_count() == 80
        points = store.points()
    assert len(points) == 400 and len({(p.session.id, p.case.case_id) for p in points}) == 400


def test_first_use_creates_a_versioned_schema_and_a_newer_one_is_refused(tmp_path):
    path = tmp_path / "h.db"
    with open_store(str(path)) as store:  # a plain path is SQLite
        assert store.session_count() == 0
    import sqlite3

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM dlperf_meta").fetchone() == (str(SCHEMA_VERSION),)
        conn.execute("UPDATE dlperf_meta SET value = '99'")
    with pytest.raises(StoreError, match=r"schema version 99, written by a newer pytest-dlperf"):
        open_store(f"sqlite:///{path}")
    with pytest.raises(StoreError, match=r"unknown history URL scheme 'mysql'"):
        store_for("mysql://u:secret@h/db")
    with pytest.raises(StoreError, match=r"postgresql://u:\*\*\*@127.0.0.1:1/db: ") as caught:
        open_store("postgresql://u:secret@127.0.0.1:1/db")
    assert "secret" not in str(caught.value) and "\n" not in str(caught.value)


def downgrade(store, version: int) -> None:
    """Leave ``store`` as a pytest-dlperf of schema ``version`` left it: without the columns added since."""
    def drop(cursor) -> None:
        for later in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[later]:
                table = statement.split("ALTER TABLE ")[1].split()[0]
                column = statement.split("ADD COLUMN ")[1].split()[0]
                cursor.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        cursor.execute("UPDATE dlperf_meta SET value = ?".replace("?", store.placeholder), (str(version),))

    store._transaction(drop, write_lock=True)


def test_an_older_store_is_brought_to_this_schema_version_in_place(store_url):
    """A version-1 store (no memory_gbs nor core_gflops column) keeps its rows, gains the columns and the
    version when opened; so do a version-2 one (no core_gflops) and a version-3 one (no message, busy,
    busy_runs, scaling_efficiency, mfu nor time_to_target)."""
    write_sessions(store_url, [1000.0, 1010.0])

    def version(cursor):
        cursor.execute("SELECT value FROM dlperf_meta")
        return cursor.fetchone()[0]

    with open_store(store_url) as store:  # back to version 1, as an older pytest-dlperf left it
        downgrade(store, 1)
    with open_store(store_url) as store:
        assert [p.case.memory_gbs for p in store.points()] == [None, None]
        session = SessionRow(id="new", created="2026-12-01T00:00:00.000000+00:00", machine=MACHINE, verdict_rules=2)
        store.append(session, [CaseRow("resnet50-amp-bs256-gpu8", CASE, "img/s", 990.0, (990.0,), "pass",
                                       memory_gbs=12.5, core_gflops=50.0, message="within 5%", mfu=0.41,
                                       decided=False)])
        assert [p.case.memory_gbs for p in store.points()] == [None, None, 12.5]
        assert [p.case.decided for p in store.points()] == [None, None, False]  # version 6: whether it decided
        assert [p.session.verdict_rules for p in store.points()] == [None, None, 2]  # version 7: the rules
        assert [p.case.core_gflops for p in store.points()] == [None, None, 50.0]
        assert [(p.case.message, p.case.mfu) for p in store.points()][1:] == [(None, None), ("within 5%", 0.41)]
        assert store._transaction(version) == str(SCHEMA_VERSION) == "8"
        downgrade(store, 2)
    with open_store(store_url) as store:  # version 2
        assert [p.case.memory_gbs for p in store.points()] == [None, None, 12.5]
        assert [p.case.core_gflops for p in store.points()] == [None, None, None]
        assert store._transaction(version) == str(SCHEMA_VERSION)
        downgrade(store, 3)
    with open_store(store_url) as store:  # version 3, as the last pytest-dlperf left it
        assert [p.case.core_gflops for p in store.points()] == [None, None, None]
        assert [p.case.message for p in store.points()] == [None, None, None]
        assert store._transaction(version) == str(SCHEMA_VERSION)


def test_gate_catches_a_step_at_the_newest_figures_only():
    rng = np.random.default_rng(5)
    flat = 1000 * (1 + 0.01 * rng.standard_normal(30))
    assert changepoints.newest_step(flat) is None
    step = changepoints.newest_step([*flat, 960.0])  # -4%: within a 5% tolerance, 4 sigma of this noise
    assert step is not None and step.index == 30 and -0.05 < step.change < -0.03
    assert changepoints.newest_step([*flat, 1040.0]) is None  # faster is no regression
    assert changepoints.newest_step([*flat[:20], *(flat[20:] * 0.96)]) is None  # an old step: not tonight's


def test_baseline_from_history_is_the_median_of_the_last_sessions_with_their_spread():
    from pytest_dlperf.cases import Case

    points = []
    probes = [20.0] * 5 + [None, 12.0, 14.0, 13.0]  # the oldest kept session had no probe
    for i, (figure, probe) in enumerate(zip([50.0] * 5 + [100.0, 104.0, 96.0, 100.0], probes)):
        session = SessionRow(id=str(i), created=f"2026-11-{i + 1:02d}T00:00:00", machine=MACHINE)
        points.append(analysis.Point(session, CaseRow("tiny-fp32-bs32-gpu1", {}, "img/s", figure, (), "pass",
                                                      memory_gbs=probe, core_gflops=probe and 4 * probe)))
    found = hooks.HistoryBaselines(4, MACHINE, analysis.baselines(points, 4))
    case = Case("tiny", "fp32", 32, 1)
    expected = found.expected(case, "img/s", 0.05)
    assert expected.throughput == 100.0 and expected.figures == (100.0, 104.0, 96.0, 100.0)
    assert expected.source.startswith(f"history: last 4 session(s) on {MACHINE} (2026-11-06 .. 2026-11-09)")
    assert expected.tolerance == 0.05  # as asked: the sessions' spread is the interval's, not the threshold's
    assert expected.memory_gbs == 13.0  # the bandwidth reference: the median of the kept sessions' probes
    assert expected.core_gflops == 52.0  # the core reference, likewise
    assert found.expected(Case("tiny", "fp32", 16, 1), "img/s", 0.05) is None


def test_a_session_writes_history_is_judged_against_it_and_gated(dlperf, capsys):
    """One real session: its case is judged against its last 8 sessions here (which a slow machine
    never reaches), it is written to the store, the report gains the history section, and the
    gate fails the session because the newest figure starts a downward step; then ``dlperf history --html``
    draws the store as a site, as a nightly job's next step does."""
    url = f"sqlite:///{dlperf.path / 'history.db'}"
    machine = machine_class("cpu", environment.collect(dlperf.path))
    rng = np.random.default_rng(1)
    write_sessions(url, 1e7 * (1 + 0.01 * rng.standard_normal(12)), case_id="tiny-fp32-bs32-gpu1",
                   machine=machine)
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-batch-size", "32", "--dlperf-history", url,
                        "--dlperf-baseline-from-history", "8", "--dlperf-history-gate",
                        "--dlperf-json", "r.json", "--dlperf-report", "r.md")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"history: last 8 session(s) on {machine}" in out
    assert "tiny-fp32-bs32-gpu1 on " in out and "the newest figure starts a downward step" in out
    assert "--dlperf-history-gate fails the session" in out
    document = dlperf.results("r.json")
    (case,) = document["cases"]
    assert len(case["baseline"]["figures"]) == 8 and case["verdict"] == "fail"
    assert document["history"]["cases"][0]["sessions"] == 13 and document["history"]["cases"][0]["newest_step"]
    assert "## History" in (dlperf.path / "r.md").read_text()
    with open_store(url) as store:
        assert store.session_count() == 13
        newest = store.points()[-1].case
    # The session's probe is kept (the median of its counted runs'), a later session's bandwidth reference.
    probes = [r["memory_gbs"] for r in case["evidence"]["runs"] if not r["busy"]]
    assert newest.memory_gbs == pytest.approx(statistics.median(probes), abs=1e-3) and newest.memory_gbs > 0
    cores = [r["core_gflops"] for r in case["evidence"]["runs"] if not r["busy"]]
    assert newest.core_gflops == pytest.approx(statistics.median(cores), abs=1e-3) and newest.core_gflops > 0
    # The site of the store, this session's night in it with its verdict's line and its results linked.
    site = dlperf.path / "site"
    capsys.readouterr()
    assert cli.main(["history", url, "--html", str(site), "--link", "results=r.json"]) == 1  # the downward step
    printed = capsys.readouterr().out
    assert f"dlperf: history site of 1 case(s) on 1 machine class(es) in {site / 'index.html'}" in printed
    (page,) = json.loads((site / "dlperf-site.json").read_text())["cases"]
    assert page["id"] == "tiny-fp32-bs32-gpu1" and page["machine"] == machine
    text = (site / page["page"]).read_text()
    assert str(markupsafe.escape(case["message"])) in text and text.count('href="../../r.json"') == 13  # every night
    bad = dlperf.run("--dlperf-model", "tiny", "--dlperf-history-gate")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dlperf-history-gate: needs a history store: give --dlperf-history URL" in bad.stderr.str()
    assert json.loads(json.dumps(document["options"]))["history_url"] == url


def test_history_command_exit_status_selection_and_plots(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    rng = np.random.default_rng(7)
    write_sessions(url, [*(1000 * (1 + 0.01 * rng.standard_normal(30))), 940.0])
    write_sessions(url, 2000 * (1 + 0.01 * rng.standard_normal(10)), case_id="tiny-fp32-bs32-gpu1", start=100)
    assert cli.main(["history", url, "--plot", str(tmp_path / "plots")]) == 1  # the newest figure starts a step
    out = capsys.readouterr().out
    assert "2 case(s) on 1 machine class(es)" in out
    assert "gate: resnet50-amp-bs256-gpu8 on AMD EPYC, 2 CPUs: the newest figure starts a downward step" in out
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "history-resnet50-amp-bs256-gpu8--AMD-EPYC-2-CPUs.png", "history-tiny-fp32-bs32-gpu1--AMD-EPYC-2-CPUs.png"]
    assert cli.main(["history", url, "--case", "tiny-*"]) == 0
    assert "1 case(s)" in capsys.readouterr().out
    assert cli.main(["history", str(tmp_path / "none.db")]) == 2
    assert capsys.readouterr().err.strip() == f"dlperf: {tmp_path / 'none.db'}: no such history file " \
                                              "(--dlperf-history writes it)"
    assert not (tmp_path / "none.db").exists()


def test_a_session_row_keeps_why_busy_nights_scaling_mfu_and_time_to_target():
    """case_rows keeps each judged case's verdict line, an inconclusive one too, a night whose every run was
    busy, the scaling efficiency, MFU and a time-to-accuracy case's time to target; the trend leaves out the
    inconclusive and busy nights."""
    from pytest_dlperf.cases import Case
    from pytest_dlperf.history.records import case_rows
    from pytest_dlperf.gate.evidence import Evidence
    from pytest_dlperf.results.case import CaseResult, Expected, Scaling, Status

    def result(case_id, verdict, throughput, **fields):
        case = fields.pop("case", Case("tiny", "fp32", 32, 1))
        return CaseResult(id=case_id, case=case, unit="img/s", verdict=verdict, throughput=throughput,
                          message=f"{case_id}: why", **fields)

    busy_run = {"index": 0, "throughput": 400.0, "busy": "other processes used 180% CPU"}
    counted_run = {"index": 1, "throughput": 990.0, "busy": None}
    results = [
        result("a", Status.PASS, 990.0, baseline=Expected(1000.0, "img/s", 0.05),
               evidence=Evidence.from_dict({"estimate": {"value": 990.0}, "runs": [busy_run, counted_run]}),
               scaling=Scaling(2, 600.0, "this session", 1.65, 0.825, None), flops={"mfu": 0.41}),
        result("b", Status.INCONCLUSIVE, 950.0,
               evidence=Evidence.from_dict({"estimate": {"value": 950.0}, "runs": [counted_run]})),
        result("c", Status.INCONCLUSIVE, 400.0, evidence=Evidence.from_dict({"estimate": None, "runs": [busy_run]})),
        result("d", Status.SKIPPED, None),
        result("e", Status.PASS, None, case=Case("tiny", "fp32", 32, 1, target={"metric": "top1", "value": 0.9}),
               convergence={"seconds_to_target": 7.5, "baseline": {"seconds": 8.0, "tolerance": 0.5}}),
    ]
    rows = {row.case_id: row for row in case_rows(results)}
    assert sorted(rows) == ["a", "b", "c", "e"]
    a, b, c, e = rows["a"], rows["b"], rows["c"], rows["e"]
    assert (a.message, a.busy, a.busy_runs, a.scaling_efficiency, a.mfu) == ("a: why", None, 1, 0.825, 0.41)
    assert (a.baseline, a.tolerance, a.on_trend) == (1000.0, 0.05, True)
    assert (b.verdict, b.busy, b.on_trend) == ("inconclusive", None, True)  # undecided, on counted runs: on the trend
    assert (c.busy, c.busy_runs, c.on_trend) == ("other processes used 180% CPU", 1, False)
    assert (e.throughput, e.time_to_target, e.baseline, e.tolerance, e.on_trend) == (None, 7.5, 8.0, 0.5, False)
    session = SessionRow(id="s", created="2026-11-01T00:00:00", machine=MACHINE)
    points = [analysis.Point(session, row) for row in rows.values()]
    assert [p.case.case_id for (_, _), group in analysis.series(points).items() for p in group] == ["a", "b"]


def test_the_split_cost_is_ruptures_l2_and_finds_its_split():
    """The cumulative-sum cost gives ruptures' CostL2 values, and Binseg with it the split Binseg(model="l2") finds."""
    import ruptures

    rng = np.random.default_rng(11)
    for trial in range(20):
        n = int(rng.integers(8, 120))
        x = 1000 * (1 + 0.02 * rng.standard_normal(n))
        x[int(rng.integers(3, n - 3)):] *= 1 + rng.choice([-0.08, -0.02, 0.0, 0.03])
        ours = changepoints._cost_l2_sums()().fit(x.reshape(-1, 1))
        theirs = ruptures.costs.CostL2().fit(x.reshape(-1, 1))
        for start, end in [(0, n), (0, 3), (2, n - 1), (n // 2, n)]:
            assert ours.error(start, end) == pytest.approx(theirs.error(start, end), rel=1e-9, abs=1e-6)
        reference = ruptures.Binseg(model="l2", min_size=3, jump=1).fit(x.reshape(-1, 1)).predict(n_bkps=1)[0]
        assert changepoints._best_split(x, 3) == reference, trial


def test_the_curtailed_permutation_test_decides_as_the_full_one():
    """No change: stopped after the first 99 permutations, p far above ALPHA.  A clear step: every permutation
    drawn, p at the full test's resolution.  Across steps of every size the decision is the full test's
    (scipy's permutation_test with all 999), wherever that one's p-value is not within its own Monte Carlo
    error of ALPHA."""
    from scipy import stats

    rng = np.random.default_rng(3)
    flat = 1 + 0.02 * rng.standard_normal(60)
    p = changepoints._split_pvalue(flat, 3, seed=1)
    assert p > 0.1 and round(p * (changepoints.FIRST_PERMUTATIONS + 1)) == pytest.approx(
        p * (changepoints.FIRST_PERMUTATIONS + 1))
    stepped = np.concatenate([flat[:30], flat[30:] * 0.9])
    p = changepoints._split_pvalue(stepped, 3, seed=1)
    assert p == 1 / (changepoints.PERMUTATIONS + 1)
    compared = 0
    for size in np.linspace(0, 0.03, 16):
        x = np.concatenate([flat[:40], flat[40:] * (1 - size)])
        full = stats.permutation_test(
            (x,), lambda s, axis: changepoints._split_gain(s, axis, 3), permutation_type="pairings",
            vectorized=True, n_resamples=changepoints.PERMUTATIONS, alternative="greater",
            rng=np.random.default_rng(7)).pvalue
        if abs(full - changepoints.ALPHA) < 0.008:
            continue
        compared += 1
        assert (changepoints._split_pvalue(x, 3, seed=2) <= changepoints.ALPHA) == (full <= changepoints.ALPHA), size
    assert compared >= 12


def test_dlperf_history_says_where_the_verdict_rules_changed(tmp_path, capsys):
    # Issue 51: every night records the rules it was judged by; the history says where they changed before it
    # compares across them.
    url = f"sqlite:///{tmp_path / 'history.db'}"
    with open_store(url) as store:
        for i, rules in enumerate((1, 1, 2, 2)):
            session = SessionRow(id=f"s{i}", created=(START + _dt.timedelta(days=i)).isoformat(timespec="microseconds"),
                                 machine=MACHINE, verdict_rules=rules)
            store.append(session, [CaseRow("c", CASE, "img/s", 1000.0 + i, (1000.0 + i,), "pass")])
    assert cli.main(["history", url]) == 0
    out = capsys.readouterr().out
    assert "  verdict rules 1 -> 2 at session 3 of 4 (2026-" in out and "judged by different rules" in out
