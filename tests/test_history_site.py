"""The history site (``dlperf history URL --html DIR``), built from stores of known sessions and read in a real
browser: headless Chromium (tests/browser.py) loads it from ``file://``, with no server and no network."""

from __future__ import annotations

import datetime as _dt
import html as _html
import json
import math
import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from pytest_dlperf import cli
from pytest_dlperf.history import dashboard, html
from pytest_dlperf.history.records import CaseRow, Point, SessionRow
from pytest_dlperf.history.store import open_store

from tests.test_history import synthetic

EPYC = "AMD EPYC, 2 CPUs"
H100 = "8 x NVIDIA H100 80GB HBM3"
START = _dt.datetime(2026, 10, 1, 2, 0, tzinfo=_dt.timezone.utc)
RESNET = "resnet50-amp-bs256-gpu8"
TINY = "tiny-fp32-bs32-gpu1"
BERT = "bert-tiny-fp32-bs8-gpu1-seq32"
TTA = "tiny-fp32-bs32-gpu1-data=torchvision-top1-0.9"


def case_json(model: str, precision: str, batch: int, gpus: int, **extra) -> dict:
    return {"model": model, "precision": precision, "batch_size": batch, "gpus": gpus, "settings": {}, **extra}


def session(machine: str, night: int, *, torch: str = "2.13.0", commit: str = "3fa2c1e") -> SessionRow:
    return SessionRow(id=f"{machine[:4].strip()}-{night:03d}", created=(START + _dt.timedelta(days=night)).isoformat(
        timespec="microseconds"), machine=machine, hostname="node1", gpu="NVIDIA H100 80GB HBM3"
        if machine == H100 else None, driver="580.65" if machine == H100 else None, torch=torch,
        git_commit=commit + "0" * 33, git_branch="main")


def write_known_history(url: str) -> dict[str, dict]:
    """Two machine classes, four cases, 52 sessions, each case's newest night known:

    - resnet50 on the H100s: 40 nights with a 6% step at night 25 (torch 2.13.0 -> 2.14.1), the newest 4,700
      img/s against a baseline of 5,000 (fail, -6.0%); scaling efficiency and MFU every night;
    - tiny on the EPYC: 12 nights around 2,000 img/s, the newest inconclusive at 1,900 (-5.0%), off the trend;
    - bert-tiny on the EPYC: 8 nights, the newest crashed (error, no figure);
    - a time-to-accuracy case on the EPYC: 8 nights of seconds to target, the newest 7.6 s against 8.0 (pass).
    """
    step = synthetic("step")
    step[-1] = 4700.0
    with open_store(url) as store:
        for night, figure in enumerate(step):
            new = night >= 25
            row = session(H100, night, torch="2.14.1" if new else "2.13.0", commit="9b04d7e" if new else "3fa2c1e")
            verdict = "fail" if figure < 4750 else "pass"
            store.append(row, [CaseRow(RESNET, case_json("resnet50", "amp", 256, 8), "img/s", float(figure),
                                       (figure * 0.99, float(figure), figure * 1.01), verdict, 5000.0, 0.05,
                                       message=f"{RESNET}: {figure:.1f} img/s vs the baseline 5,000 img/s",
                                       scaling_efficiency=0.91, mfu=0.42)])
        for night in range(12):
            cases = []
            tiny = 2000.0 + 10 * ((night * 7) % 5 - 2)
            tiny_verdict = "pass"
            if night == 11:
                tiny, tiny_verdict = 1900.0, "inconclusive"
            phases = {"step": 0.016, "data": 0.0, "forward": 0.004, "backward": 0.011 if night == 11 else 0.008,
                      "optimizer": 0.002, "other": 0.002}
            cases.append(CaseRow(TINY, case_json("tiny", "fp32", 32, 1), "img/s", tiny, (tiny,), tiny_verdict, 2000.0,
                                 0.05, message=f"{TINY}: {tiny_verdict} at {tiny:.1f} img/s", phases=phases))
            if night >= 4:
                crashed = night == 11
                cases.append(CaseRow(BERT, case_json("bert-tiny", "fp32", 8, 1, settings={"seq_len": 32}), "seq/s",
                                     None if crashed else 80.0 + night % 3, (), "error" if crashed else "pass", 80.0,
                                     0.05, message=f"{BERT}: the worker ran out of memory" if crashed else None))
                seconds = 7.6 if night == 11 else 7.9 + 0.1 * (night % 3)
                cases.append(CaseRow(TTA, case_json("tiny", "fp32", 32, 1, target={"metric": "top1", "value": 0.9}),
                                     "s", None, (), "pass", 8.0, 0.5, time_to_target=seconds,
                                     message=f"{TTA}: reached top1 0.9 in {seconds} s"))
            store.append(session(EPYC, night), cases)
    return {
        RESNET: {"machine": H100, "figure": "4,700", "unit": "img/s", "verdict": "fail", "change": "−6.0%",
                 "nights": "40", "open": "1"},
        TINY: {"machine": EPYC, "figure": "1,900", "unit": "img/s", "verdict": "inconclusive", "change": "−5.0%",
               "nights": "12", "open": "0"},
        BERT: {"machine": EPYC, "figure": "—", "unit": "seq/s", "verdict": "error", "change": "—", "nights": "8",
               "open": "0"},
        TTA: {"machine": EPYC, "figure": "7.6", "unit": "s to top1 0.9", "verdict": "pass", "change": "−5.0%",
              "nights": "8", "open": "0"},
    }


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return request.getfixturevalue("postgres_url")


def build(url: str, folder: Path, *extra: str) -> int:
    return cli.main(["history", url, "--html", str(folder), *extra])


ROWS = """return Array.from(document.querySelectorAll('#overview tbody tr')).filter(r => !r.hidden).map(r => ({
    case: r.dataset.case, machine: r.cells[1].textContent.trim(), nights: r.cells[3].textContent.trim(),
    figure: r.cells[4].childNodes[0].textContent.trim(), unit: r.cells[4].querySelector('.unit').textContent.trim(),
    verdict: r.dataset.verdict, badge: r.cells[5].querySelector('.verdict').textContent.trim(),
    change: r.cells[6].textContent.trim(), step: r.cells[8].textContent.trim(), open: r.dataset.open,
    href: r.cells[0].querySelector('a').getAttribute('href')}));"""


def case_page(site: Path, machine: str, case_id: str) -> Path:
    return site / "cases" / f"{dashboard.case_key(machine, case_id)}.html"


def test_the_overview_lists_every_case_with_its_verdict_and_numbers(store_url, tmp_path, page, capsys):
    expected = write_known_history(store_url)
    site = tmp_path / "site"
    assert build(store_url, site) == 0, capsys.readouterr().err
    assert "history site of 4 case(s) on 2 machine class(es)" in capsys.readouterr().out
    page.open(site / "index.html")
    rows = {row["case"]: row for row in page.js(ROWS)}
    assert sorted(rows) == sorted(expected)
    for case_id, want in expected.items():
        row = rows[case_id]
        for key, value in want.items():
            assert row[key] == value, (case_id, key, row)
        assert row["href"] == f"cases/{dashboard.case_key(want['machine'], case_id)}.html"
    assert rows[RESNET]["step"].startswith("open: −") and "since 2026-10-2" in rows[RESNET]["step"]
    assert rows[TINY]["step"] == "none" and rows[TINY]["badge"] == "inconclusive"
    assert page.js("return document.getElementById('shown').textContent") == "4 of 4 cases"
    # Every script and style came from the site's own folder: nothing from the network.
    own = site.resolve().as_uri() + "/"
    assert sorted(page.requests()) == [own + "assets/dashboard.css", own + "assets/overview.js", own + "index.html"]
    assert page.errors() == []
    page.screenshot("overview")
    # Every case page opens without an error; the resnet50 one with its scaling efficiency and MFU.
    for case_id, want in expected.items():
        page.open(case_page(site, want["machine"], case_id))
        assert page.js("return document.getElementById('case-title').textContent") == case_id
        assert page.js("return document.getElementById('chart-trend').querySelectorAll('.main-svg').length") > 0
        assert page.errors() == [], case_id
        assert all(url.startswith(own) for url in page.requests()), page.requests()
        assert own + "assets/plotly.min.js" in page.requests()
        page.screenshot(case_id)
    page.open(case_page(site, H100, RESNET))
    extra = page.js("return document.getElementById('chart-extra').data.map(t => [t.name, t.y.length, t.y[0]])")
    assert extra == [["scaling efficiency (%)", 40, pytest.approx(91.0)], ["MFU (%)", 40, pytest.approx(42.0)]]


def test_a_page_s_requests_are_its_own_not_another_page_s(tmp_path, page):
    """Requests of another page (the new-tab page that Chromium 150 opened at the start, 107 of whose requests
    once came before the site's files), or of the document before in the same tab, are in the same DevTools
    log; ``page.requests()`` keeps only the opened document's own."""
    for name in ("mine", "other"):
        (tmp_path / f"{name}.css").write_text("body { color: black; }")
        (tmp_path / f"{name}.html").write_text(
            f'<html><head><link rel="stylesheet" href="{name}.css"></head>'
            "<body><script>document.body.setAttribute('data-ready', '1');</script></body></html>")
    assert page.driver.window_handles == [page.driver.current_window_handle]  # the browser opened none of its own
    ready = "document.body && document.body.getAttribute('data-ready') === '1'"
    page.open(tmp_path / "other.html")  # its requests stay in the log: the next open below does not drain it
    first = page.driver.current_window_handle
    page.driver.switch_to.new_window("tab")
    try:
        for name in ("other", "mine"):  # the other document, then the test's, in the second tab
            page._url = (tmp_path / f"{name}.html").as_uri()
            page.driver.get(page._url)
            page.wait(ready)
        page._log.extend(json.loads(entry["message"]) for entry in page.driver.get_log("performance"))
        asked = {(record["webview"], record["message"]["params"]["request"]["url"]) for record in page._log
                 if record["message"].get("method") == "Network.requestWillBeSent"}
        other_css = (tmp_path / "other.css").as_uri()
        assert {(first, other_css), (page.driver.current_window_handle, other_css)} <= asked, asked
        assert page.requests() == [(tmp_path / "mine.html").as_uri(), (tmp_path / "mine.css").as_uri()]
    finally:
        page.driver.close()
        page.driver.switch_to.window(first)


def test_a_case_page_shows_the_6pct_step_where_it_is_with_what_changed(tmp_path, page, capsys):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    site = tmp_path / "site"
    assert build(url, site) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "change point at session" in x and "img/s" in x]
    page.open(case_page(site, H100, RESNET))
    changes = page.js("""return Array.from(document.querySelectorAll('#changes tbody tr')).map(r => ({
        first: r.cells[1].querySelector('a').textContent, step: r.cells[2].textContent.trim(),
        interval: r.cells[3].textContent.trim(), env: Array.from(r.querySelectorAll('li')).map(li => li.textContent)}))""")
    assert len(changes) == 1, changes
    (change,) = changes
    night = int(re.search(r"change point at session (\d+)", line).group(1)) - 1
    assert abs(night - 25) <= 1, line  # the seeded step: the 26th night is the first after it
    assert change["first"] == f"{START + _dt.timedelta(days=night):%Y-%m-%d %H:%M}"
    size = float(change["step"].replace("−", "-").rstrip("%"))
    assert -7.5 <= size <= -4.5, change
    assert "torch 2.13.0 -> 2.14.1" in change["env"] and "git 3fa2c1e..9b04d7e" in change["env"], change
    # In the chart: the change point's marker at that night, and what changed in its hover label.
    trace = page.js("""const gd = document.getElementById('chart-trend');
        const i = gd.data.findIndex(t => t.name === 'change point');
        return {i: i, x: gd.data[i].x, text: gd.data[i].text};""")
    assert trace["x"] == [f"{START + _dt.timedelta(days=night):%Y-%m-%d %H:%M:%S}"]
    page.js("const gd = document.getElementById('chart-trend'); Plotly.Fx.hover(gd, [{curveNumber: arguments[0], "
            "pointNumber: 0}]);", trace["i"])
    page.wait("document.querySelector('#chart-trend .hoverlayer .hovertext')")
    hover = page.js("return document.querySelector('#chart-trend .hoverlayer .hovertext').textContent")
    assert "torch 2.13.0 -> 2.14.1" in hover and "git 3fa2c1e..9b04d7e" in hover and "change point" in hover, hover
    shapes = page.js("return document.getElementById('chart-trend').layout.shapes.length")
    assert shapes == 1
    assert page.errors() == []
    page.screenshot("step-hover", full=False)


def test_inconclusive_busy_and_crashed_nights_are_marked_not_points_of_the_trend(tmp_path, page):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    with open_store(url) as store:  # a 13th night on which every run of tiny was busy
        store.append(session(EPYC, 12), [CaseRow(TINY, case_json("tiny", "fp32", 32, 1), "img/s", 800.0, (800.0,),
                                                 "inconclusive", 2000.0, 0.05, busy="other processes used 180% CPU",
                                                 busy_runs=1, message=f"{TINY}: inconclusive: the machine was busy")])
    site = tmp_path / "site"
    assert build(url, site) == 0
    page.open(case_page(site, EPYC, TINY))
    traces = page.js("return document.getElementById('chart-trend').data.map(t => [t.name, t.x.length])")
    names = dict(traces)
    assert names["throughput (median of a night)"] == 11  # 13 nights less the inconclusive and the busy one
    assert names["inconclusive night (not on the trend)"] == 1 and names["busy night (not on the trend)"] == 1
    standings = page.js("return Array.from(document.querySelectorAll('#nights-table tbody tr')).map("
                        "r => r.dataset.standing)")
    assert standings[:2] == ["busy", "inconclusive"] and set(standings[2:]) == {"trend"}
    notes = page.js("return Array.from(document.querySelectorAll('p.note')).map(p => p.textContent)")
    assert any("1 night(s) inconclusive" in n for n in notes) and any("1 night(s) busy" in n for n in notes), notes
    page.open(case_page(site, EPYC, BERT))
    assert page.js("return document.querySelector('#nights-table tbody tr').dataset.standing") == "no figure"
    assert "the worker ran out of memory" in page.js("return document.getElementById('latest-why').textContent")
    page.open(case_page(site, EPYC, TTA))  # time to target: lower is better
    assert page.js("return document.getElementById('chart-trend').layout.yaxis.title.text") == "s to top1 0.9"
    assert "lower is better" in page.js("return document.querySelector('h2').textContent")
    assert page.errors() == []


def test_filtering_and_sorting_change_what_is_shown(tmp_path, page):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    site = tmp_path / "site"
    assert build(url, site) == 0
    page.open(site / "index.html")

    def shown() -> list[str]:
        return [row["case"] for row in page.js(ROWS)]

    def choose(key: str, value: str) -> None:
        page.js("const s = document.getElementById('filter-' + arguments[0]); s.value = arguments[1]; "
                "s.dispatchEvent(new Event('change'));", key, value)

    choose("verdict", "fail")
    assert shown() == [RESNET]
    assert page.js("return document.getElementById('shown').textContent") == "1 of 4 cases"
    choose("verdict", "")
    choose("machine", EPYC)
    assert sorted(shown()) == sorted([TINY, BERT, TTA])
    choose("gpus", "8")
    assert shown() == [] and page.js("return document.getElementById('none-shown').hidden") is False
    choose("gpus", "")
    page.driver.find_element("id", "filter-text").send_keys("TINY-fp32-BS32")
    assert sorted(shown()) == sorted([TINY, TTA])
    assert "machine=AMD%20EPYC%2C%202%20CPUs" in page.driver.current_url and "text=TINY-fp32-BS32" in page.driver.current_url
    page.driver.find_element("id", "filter-reset").click()
    assert len(shown()) == 4
    page.driver.find_element("id", "filter-open").click()
    assert shown() == [RESNET]
    page.driver.find_element("id", "filter-open").click()
    # Sorting: by the change against the baseline (no figure last), then the other way.
    page.driver.find_element("css selector", "th[data-key=change] button").click()
    order = shown()
    assert order[-1] == BERT and order[0] == RESNET, order  # -6.0% first, then the two -5.0%, none last
    assert page.js("return document.querySelector('th[data-key=change]').getAttribute('aria-sort')") == "ascending"
    page.driver.find_element("css selector", "th[data-key=change] button").click()
    assert shown()[0] in (TINY, TTA) and shown()[-1] == BERT
    page.driver.find_element("css selector", "th[data-key=nights] button").click()
    assert [row["nights"] for row in page.js(ROWS)] == ["8", "8", "12", "40"]
    # The address keeps the view: opened again, the same filters and order.
    choose("precision", "fp32")
    address = page.driver.current_url
    assert "sort=nights:asc" in address and "precision=fp32" in address
    page.driver.get("about:blank")
    page.open(address)
    assert page.js("return document.getElementById('filter-precision').value") == "fp32"
    assert [row["case"] for row in page.js(ROWS)] == [BERT, TTA, TINY] or \
        [row["case"] for row in page.js(ROWS)] == [TTA, BERT, TINY]
    assert page.errors() == []
    page.screenshot("filtered")


def test_bad_input_gives_a_page_that_says_so_or_one_line(tmp_path, page, capsys):
    # An empty store: an overview that says so.
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(empty).close()
    assert build(empty, tmp_path / "empty") == 0
    page.open(tmp_path / "empty" / "index.html")
    assert "holds no session yet" in page.js("return document.getElementById('empty').textContent")
    assert page.errors() == []
    page.screenshot("empty")
    # A store of a newer schema version: one line, no site.
    newer = tmp_path / "newer.db"
    open_store(str(newer)).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE dlperf_meta SET value = '99'")
    capsys.readouterr()
    assert build(f"sqlite:///{newer}", tmp_path / "newer") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "schema version 99, written by a newer pytest-dlperf" in err, err
    assert not (tmp_path / "newer").exists()
    # One session of a case, a non-finite figure in an old row, a case id and a host name with HTML in them.
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    evil = '<img src=x onerror="document.title=\'pwned\'">-gpu1'
    with open_store(url) as store:
        store.append(session(EPYC, 0), [CaseRow("single-fp32-bs8-gpu1", case_json("single", "fp32", 8, 1), "img/s",
                                                100.0, (100.0,), "no-baseline")])
        for night in range(1, 9):
            figure = math.inf if night == 2 else 500.0 + night
            store.append(dataclass_replace(session(EPYC, night), hostname="<b>host</b>"),
                         [CaseRow(evil, case_json("<script>alert(1)</script>", "fp32", 8, 1), "img/s", figure,
                                  (figure, math.nan), "pass", message="<script>document.title='pwned'</script>")])
    capsys.readouterr()
    assert build(url, tmp_path / "odd") == 0
    assert "<img src=x" in capsys.readouterr().out  # the text report has it as it is
    page.open(tmp_path / "odd" / "index.html")
    assert {row["case"] for row in page.js(ROWS)} == {"single-fp32-bs8-gpu1", evil}
    assert page.js("return document.querySelectorAll('img, script:not([src])').length") == 0
    assert page.js("return document.title") != "pwned"
    page.open(case_page(tmp_path / "odd", EPYC, "single-fp32-bs8-gpu1"))
    notes = page.js("return Array.from(document.querySelectorAll('p.note')).map(p => p.textContent)")
    assert notes == ["1 night(s) on the trend: change points need at least 6 (3 on either side of a step)"]
    assert page.errors() == []
    page.open(case_page(tmp_path / "odd", EPYC, evil))
    assert page.js("return document.getElementById('case-title').textContent") == evil
    assert page.js("return document.querySelectorAll('main img').length") == 0 and page.js("return document.title") \
        != "pwned"
    notes = page.js("return Array.from(document.querySelectorAll('p.note')).map(p => p.textContent)")
    assert any("1 night(s) with a figure that is not a finite number in the store (inf)" in n for n in notes), notes
    assert page.js("return document.getElementById('chart-trend').data[0].x.length") >= 7
    # Hover a night: the verdict's line and the host name show as text.
    page.js("const gd = document.getElementById('chart-trend'); const i = gd.data.findIndex(t => t.name.startsWith("
            "'throughput')); Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);")
    page.wait("document.querySelector('#chart-trend .hoverlayer .hovertext')")
    hover = page.js("return document.querySelector('#chart-trend .hoverlayer .hovertext').textContent")
    assert "<b>host</b>" in hover and "<script>document.title='pwned'</script>" in hover, hover
    assert page.errors() == []
    page.screenshot("html-in-names")


#: Text that would end the page's JSON script, open a script, a comment or an attribute, as a case id, a message,
#: a host name, a branch and a machine class in the store: each must show as itself, as text.
HOSTILE = """</script><script>document.title="pwned"</script><!--'"&amp;<b>bold</b>"""
HOSTILE_CASE = f"evil{HOSTILE}-gpu1"
HOSTILE_MACHINE = '../../../M"></td><svg onload="document.title=\'pwned\'">' + HOSTILE


def write_hostile_history(url: str) -> None:
    with open_store(url) as store:
        for night in range(8):
            row = dataclass_replace(session(EPYC, night), machine=HOSTILE_MACHINE,
                                    hostname="\"><svg onload=document.title='pwned'>", git_branch="</script>")
            store.append(row, [CaseRow(HOSTILE_CASE, case_json(HOSTILE, "fp32", 8, 1), "img/s", 500.0 + night,
                                       (500.0 + night,), "pass", 500.0, 0.05, message=f"{HOSTILE} ]]> </SCRIPT >")])


class _Elements(HTMLParser):
    """Each element of a page with its attributes, and the text of each element with an id."""

    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: dict[str, str] = {}
        self.data = ""  # all of the page's text
        self._open: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in ("meta", "link", "br", "input", "img"):
            self._open.append(dict(attrs).get("id"))

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        self.data += data
        for key in filter(None, self._open):
            self.text[key] = self.text.get(key, "") + data


def test_hostile_text_in_the_store_stays_text_in_the_html(tmp_path):
    # Without a browser: the markup and the embedded JSON, read by an HTML parser as a browser tokenizes them.
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    write_hostile_history(url)
    assert build(url, tmp_path / "site") == 0
    # Its pages are files of the site: a "../" in a machine class or a case id names no other folder.
    written = sorted(p.relative_to(tmp_path).parts[:2] for p in tmp_path.rglob("*.html"))
    assert written == [("site", "cases"), ("site", "index.html")]
    for path, own_scripts in ((tmp_path / "site" / "index.html", 1),
                              (case_page(tmp_path / "site", HOSTILE_MACHINE, HOSTILE_CASE), 3)):
        text = path.read_text()
        page = _Elements()
        page.feed(text)
        scripts = [attrs for tag, attrs in page.elements if tag == "script"]
        # Only the site's own scripts: its files and its JSON blocks, none made of the store's text.
        assert len(scripts) == own_scripts and all("src" in a or a.get("type") == "application/json" for a in scripts)
        assert text.count("<script") == own_scripts
        handlers = {(tag, name, value) for tag, attrs in page.elements for name, value in attrs.items()
                    if name.startswith("on")}
        assert handlers <= {("form", "onsubmit", "return false")}  # the site's own, none from the store
        rows = [attrs for tag, attrs in page.elements if tag == "tr" and "data-case" in attrs]
        assert [(a["data-case"], a["data-machine"]) for a in rows] in ([], [(HOSTILE_CASE, HOSTILE_MACHINE)])
    assert page.text["case-title"] == HOSTILE_CASE and f"on {HOSTILE_MACHINE} · {HOSTILE} · fp32" in page.data
    figure = json.loads(page.text["figure-trend"])
    hover = "".join(text for t in figure["data"] for text in t.get("text") or [])
    assert _html.escape(f"{HOSTILE} ]]> </SCRIPT >", quote=False) in hover  # Plotly reads <b>: given as entities
    assert "</" not in page.text["figure-trend"]  # nothing in the JSON can end its script element


def test_hostile_text_in_the_store_shows_as_text_in_the_browser(tmp_path, page):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    write_hostile_history(url)
    assert build(url, tmp_path / "site") == 0
    inline = "return document.querySelectorAll('script:not([src]):not([type=\"application/json\"]), [onload]').length"
    page.open(tmp_path / "site" / "index.html")
    assert page.js("return document.title") != "pwned" and page.js(inline) == 0
    assert [(row["case"], row["machine"]) for row in page.js(ROWS)] == [(HOSTILE_CASE, HOSTILE_MACHINE)]
    options = page.js("return Array.from(document.querySelectorAll('#filter-machine option')).map(o => o.value)")
    assert HOSTILE_MACHINE in options
    assert page.errors() == []
    page.open(case_page(tmp_path / "site", HOSTILE_MACHINE, HOSTILE_CASE))
    assert page.js("return document.title") != "pwned" and page.js(inline) == 0
    assert page.js("return document.getElementById('case-title').textContent") == HOSTILE_CASE
    assert page.js("return document.querySelector('p.machine b').textContent") == HOSTILE_MACHINE
    assert page.js("return document.getElementById('latest-why').textContent") == f"{HOSTILE} ]]> </SCRIPT >"
    # The chart drew from the JSON block (no </script> in the text ended it early), every night of it.
    assert page.js("return document.getElementById('chart-trend').data.find(t => t.name.startsWith('throughput'))"
                   ".x.length") == 8
    page.js("const gd = document.getElementById('chart-trend'); const i = gd.data.findIndex(t => t.name.startsWith("
            "'throughput')); Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);")
    page.wait("document.querySelector('#chart-trend .hoverlayer .hovertext')")
    hover = page.js("return document.querySelector('#chart-trend .hoverlayer .hovertext').textContent")
    assert f"{HOSTILE} ]]> </SCRIPT >" in hover and "\"><svg onload=document.title='pwned'>" in hover, hover
    assert page.errors() == []
    page.screenshot("hostile-text")


def dataclass_replace(row, **changes):
    import dataclasses

    return dataclasses.replace(row, **changes)


def test_links_to_what_each_night_kept_and_bad_patterns(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    kept = tmp_path / "nights" / "AMD-005"
    kept.mkdir(parents=True)
    (kept / "report.md").write_text("# report\n")
    site = tmp_path / "site"
    patterns = ["report=" + str(tmp_path / "nights" / "{session}" / "report.md"),
                "ci=https://ci.example.org/nightly/{date}/{machine}?commit={short_commit}"]
    assert build(url, site, *sum((["--link", p] for p in patterns), [])) == 0
    text = case_page(site, EPYC, TINY).read_text()
    assert text.count('href="../../nights/AMD-005/report.md"') == 1  # the one night that kept its report
    assert 'href="https://ci.example.org/nightly/2026-10-06/AMD%20EPYC%2C%202%20CPUs?commit=3fa2c1e"' in text
    figure = json.loads(re.search(r'<script type="application/json" id="figure-trend">(.*?)</script>', text,
                                  re.S).group(1))
    trend = next(t for t in figure["data"] if t["name"].startswith("throughput"))
    assert trend["customdata"][5] == "../../nights/AMD-005/report.md"  # a click on that night opens it
    capsys.readouterr()
    assert build(url, site, "--link", "report=nights/{night}/report.md") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlperf: --link: 'report=nights/{night}/report.md': unknown placeholder {night}; expected "
                          "{session}, {date}"), err
    assert build(url, site, "--link", "nights/{session}") == 2
    assert "is not LABEL=PATTERN" in capsys.readouterr().err
    assert cli.main(["history", url, "--link", "a=b"]) == 2
    assert capsys.readouterr().err.strip() == "dlperf: --link: links are written into the site: give --html DIR too"


def test_the_site_is_written_whole_and_replaces_only_its_own(tmp_path, capsys, monkeypatch):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    site = tmp_path / "site"
    assert build(url, site) == 0
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert build(url, site, "--case", "tiny-*") == 0  # a site written before is replaced
    assert len(list((site / "cases").iterdir())) == 2 and len(before) > 8
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left
    # A build that fails half-way leaves the site before as it was.
    monkeypatch.setattr(html, "render_case", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left")))
    capsys.readouterr()
    assert build(url, site) == 2
    assert capsys.readouterr().err.strip() == f"dlperf: --html: {site}: the site was not written: No space left"
    assert len(list((site / "cases").iterdir())) == 2 and (site / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.undo()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert build(url, other) == 2
    assert "is a folder with other files in it, not a site dlperf wrote" in capsys.readouterr().err
    assert (other / "notes.txt").read_text() == "mine" and sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("")
    assert build(url, tmp_path / "file") == 2
    assert "is not a folder" in capsys.readouterr().err


def test_every_chart_is_a_valid_plotly_figure(tmp_path):
    """Plotly's own Python schema checks every property of every figure the pages carry."""
    go = pytest.importorskip("plotly.graph_objects")
    url = f"sqlite:///{tmp_path / 'history.db'}"
    write_known_history(url)
    with open_store(url) as store:
        views = dashboard.case_views(store.points(), workers=1)
    assert [v.case_id for v in views] == [RESNET, BERT, TINY, TTA]  # sorted by machine class, then case
    checked = 0
    for view in views:
        for figure in (html.trend_figure(view, tmp_path), html.extra_figure(view), html.phases_figure(view)):
            if figure is not None:
                go.Figure(figure)  # raises ValueError on a property Plotly does not know or a bad value
                json.dumps(figure, allow_nan=False)
                checked += 1
    assert checked == 6
    phases = html.phases_figure(views[2])  # tiny's nights in phases, stacked; its backward grew on the last
    assert [trace["name"] for trace in phases["data"]] == ["forward", "backward", "optimizer", "other"]
    assert phases["layout"]["barmode"] == "stack" and phases["data"][1]["y"][-2:] == [8.0, 11.0]


def test_views_of_many_cases_are_the_same_from_a_process_pool(tmp_path):
    """The analysis spread over processes finds what one process finds."""
    rng = np.random.default_rng(4)
    points = []
    for n in range(dashboard.POOL_FROM + 2):
        figures = 1000 * (1 + 0.01 * rng.standard_normal(30))
        if n % 3 == 0:
            figures[15:] *= 0.94
        for night, figure in enumerate(figures):
            points.append(Point(session(EPYC, night), CaseRow(f"case{n:02d}", case_json("tiny", "fp32", 8, 1),
                                                              "img/s", float(figure), (), "pass")))
    alone = dashboard.case_views(points, workers=1)
    pooled = dashboard.case_views(points, workers=2)
    assert [v.history.change_points for v in alone] == [v.history.change_points for v in pooled]
    stepped = [v for v in alone if int(v.case_id[4:]) % 3 == 0]
    assert len(stepped) == 9 and all(v.state is dashboard.StepState.OPEN for v in stepped)


def test_a_case_chart_marks_where_the_verdict_rules_changed(tmp_path):
    """Issue 51: the night the rules changed is marked, so that no one compares the verdicts across it unaware."""
    go = pytest.importorskip("plotly.graph_objects")
    points = []
    for night, rules in enumerate((4, 4, 5, 5)):
        row = dataclass_replace(session(EPYC, night), verdict_rules=rules)
        points.append(Point(row, CaseRow(TINY, case_json("tiny", "fp32", 32, 1), "img/s", 2000.0 + night, (2000.0,),
                                         "pass", 2000.0, 0.05)))
    view, = dashboard.case_views(points, workers=1)
    figure = html.trend_figure(view, tmp_path)
    marks = [a for a in figure["layout"]["annotations"] if a["text"].startswith("verdict rules")]
    assert [m["text"] for m in marks] == ["verdict rules 4 → 5"]
    middle = (START + _dt.timedelta(days=1.5)).strftime("%Y-%m-%d %H:%M:%S")
    assert marks[0]["x"] == middle and any(s.get("x0") == middle for s in figure["layout"]["shapes"])
    go.Figure(figure)  # a valid Plotly figure
