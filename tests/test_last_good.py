"""``--dlperf-against last-good``: pairs against the commit of the newest night that passed on this machine class.

The nightly gate that cancels the drift between sessions by design: each night's build runs in interleaved pairs
with the last build whose night passed, read from the history store, checked out in a worktree as a git revision
is.  A night of pairs that passes moves it on; a failing, crashed or dirty night never becomes it.  Before any night
has passed, a session given a baseline is judged against it (the recipe's first nights).
"""

from __future__ import annotations

import subprocess

import pytest

from pytest_dlperf import environment
from pytest_dlperf.history import analysis
from pytest_dlperf.history.records import CaseRow, Point, SessionRow, machine_class
from pytest_dlperf.history.store import open_store

from tests.test_ab import MODEL


def night(number: int, commit: str | None, *verdicts: str, against: str | None = None,
          machine: str = "AMD EPYC, 2 CPUs") -> list[Point]:
    session = SessionRow(f"s{number}", f"2026-11-{number:02d}T02:00:00.000000+00:00", machine, git_commit=commit,
                         against=against)
    case = {"model": "abnet", "precision": "fp32", "batch_size": 64, "gpus": 1, "settings": {}}
    return [Point(session, CaseRow(f"abnet-fp32-bs64-gpu{i + 1}", {**case, "gpus": i + 1}, "samples/s", 100.0,
                                   (100.0,), verdict)) for i, verdict in enumerate(verdicts)]


def test_the_newest_night_that_passed_clean_is_the_last_good_one():
    nights = [*night(1, "a" * 40, "pass", "pass"), *night(2, "b" * 40, "pass", "fail"),
              *night(3, "c" * 40 + "+dirty", "pass"), *night(4, "d" * 40, "error"), *night(5, None, "pass"),
              *night(6, "e" * 40, "no-baseline"), *night(7, "f" * 40, "inconclusive", "improved")]
    assert analysis.last_good(nights).git_commit == "f" * 40  # an undecided case fails nothing
    assert analysis.last_good(nights[:-2]).git_commit == "a" * 40  # a failed, dirty, crashed or unjudged night: not
    assert analysis.last_good(night(8, "9" * 40, "pass", against="git " + "a" * 40)).git_commit == "9" * 40
    assert analysis.last_good([]) is None


def test_last_good_needs_a_store_and_a_night_that_passed(dlperf):
    dlperf.pytester.makeconftest(MODEL.format(layers=1))
    result = dlperf.run("--dlperf-model", "abnet", "--dlperf-against", "last-good")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dlperf-against last-good: needs a history store: give --dlperf-history URL*"])
    result = dlperf.run("--dlperf-model", "abnet", "--dlperf-against", "last-good", "--dlperf-history", "h.db")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dlperf-against last-good: no night in h.db passed on * (a clean commit, a case "
                                 "passed, none failed); gate the first nights against a baseline (--dlperf-baseline) "
                                 "until one does"])


def test_the_first_nights_are_judged_against_the_baseline_until_one_passes(dlperf, monkeypatch):
    """One recipe from the first night: with a baseline and no night passed, the session gates against the
    baseline and says so; its night, once committed clean and passed, is the next session's reference."""
    for pair in environment.COMMIT_VARIABLES:  # the repository's HEAD is the commit, not a CI job's
        for name in pair:
            monkeypatch.delenv(name, raising=False)
    git = ["git", "-C", str(dlperf.path), "-c", "user.email=t@t", "-c", "user.name=t"]
    (dlperf.path / "conftest.py").write_text(MODEL.format(layers=1))
    dlperf.baseline([{"model": "abnet", "precision": "fp32", "batch_size": 64, "gpus": 1, "unit": "samples/s",
                      "throughput": 1.0, "tolerance": 0.05}])  # far below what abnet trains: improved
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "conftest.py", "baseline.json"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the first night's code"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    machine = machine_class("cpu", environment.collect(dlperf.path))
    night_args = ("--dlperf-baseline", "baseline.json", "--dlperf-against", "last-good", "--dlperf-history",
                  "history.db")
    result = dlperf.run(*night_args, "--dlperf-max-runs", "1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"dlperf: last-good: no night in history.db has passed on {machine} yet: this "
                                 "night is judged against baseline.json",
                                 "*IMPROVED abnet-fp32-bs64-gpu1*"])
    assert "A/B against" not in result.stdout.str()
    with open_store(str(dlperf.path / "history.db")) as store:
        (kept,) = store.points()  # a night of its own, not an A/B session
    assert kept.session.against is None and kept.session.git_commit == first and kept.case.verdict == "improved"
    # The next night pairs against it (its cases deselected: the reference checked out and started is the point).
    result = dlperf.run(*night_args, "-k", "no_such_case")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    result.stdout.fnmatch_lines([f"dlperf: last-good: {first[:7]}, whose night of * passed on {machine} (history.db)",
                                 f"dlperf: A/B against git {first} (*"])
    assert "judged against baseline.json" not in result.stdout.str()


def test_a_night_against_the_last_good_commit_fails_a_slower_working_copy(dlperf):
    git = ["git", "-C", str(dlperf.path), "-c", "user.email=t@t", "-c", "user.name=t"]
    (dlperf.path / "conftest.py").write_text(MODEL.format(layers=2))
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "conftest.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "two layers"], check=True)
    good = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "a later commit whose night failed"], check=True)
    later = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    machine = machine_class("cpu", environment.collect(dlperf.path))
    with open_store(str(dlperf.path / "history.db")) as store:
        for point in [*night(1, good, "pass", machine=machine), *night(2, later, "fail", machine=machine)]:
            store.append(point.session, [point.case])
    (dlperf.path / "conftest.py").write_text(MODEL.format(layers=24))  # twelve times the work: far slower
    result = dlperf.run("--dlperf-model", "abnet", "--dlperf-against", "last-good", "--dlperf-history", "history.db",
                        "-o", "dlperf_against_seed=5", "--dlperf-max-runs", "3")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    result.stdout.fnmatch_lines([f"dlperf: last-good: {good[:7]}, whose night of 2026-11-01 02:00 passed on "
                                 f"{machine} (history.db)",
                                 f"dlperf: A/B against git {good} (*"])
    assert "FAIL abnet-fp32-bs64-gpu1: " in out and "% slower than the reference (98% CI " in out, out
    with open_store(str(dlperf.path / "history.db")) as store:
        (kept,) = store.points(ab=True)
    assert kept.session.against == f"git {good}" and kept.case.verdict == "fail"
