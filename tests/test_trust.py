"""A baseline is data: its commands (argv, cwd, env) run only from a file the session trusts (docs/baselines.md,
What runs).

The rules (:mod:`pytest_dlperf.commands.trust`) and a baseline folder's files are checked in-process; short
inner sessions show the line and that nothing ran (a marker file stays absent), then that the same file runs
where it is trusted: by the option, by the ini key, and inside the rootdir. Two collection-only sessions show
what else data cannot do: history rows name no case, an outside folder records into the project.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import types
from pathlib import Path

import pytest

from pytest_dlperf.baseline import machines
from pytest_dlperf.cases import OptionError
from pytest_dlperf.commands import build_spec
from pytest_dlperf.commands.measure import execute
from pytest_dlperf.commands.trust import RefusedCommand, Trust, baseline_refusals

READ = {"parser": "final", "pattern": r"ips (?P<throughput>[\d.]+)"}


def document(cases: list[dict], **top) -> dict:
    return {"schema_version": 2, "kind": "dlperf-baseline", "hardware": {"device": "cpu", "cpu": "Test CPU 9000"},
            "provenance": {"source": "a colleague"}, **top, "cases": cases}


def entry(model: str, command: dict | None = None, throughput: float = 1.0) -> dict:
    out = {"model": model, "precision": "fp32", "batch_size": 8, "throughput": throughput, "unit": "img/s"}
    return {**out, "command": command} if command else out


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_a_file_is_trusted_by_its_real_path_inside_the_rootdir_or_named(tmp_path):
    root, outside = tmp_path / "project", tmp_path / "shared"
    inside = write(root / "baselines" / "b.json", document([]))
    theirs = write(outside / "b.json", document([]))
    (root / "link.json").symlink_to(theirs)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    trust = Trust.of(root)
    assert trust.trusts(inside) and not trust.trusts(theirs)
    # A link inside the rootdir to a file outside it is outside; so is a file in a linked folder.
    assert not trust.trusts(root / "link.json") and not trust.trusts(root / "linked" / "b.json")
    line = trust.refusal(root / "link.json", f"{root / 'link.json'}: $.cases[2].command")
    assert line.startswith(f"{root / 'link.json'}: $.cases[2].command: not run: ") and "\n" not in line
    assert f"this file (a link to {theirs}) lies outside the rootdir {root}" in line
    assert line.endswith(f"trust it: --dlperf-trust-commands {theirs} (or the ini key dlperf_trust_commands)")
    # Named: the file, the link to it, or a folder above its real path.
    for named in (theirs, root / "link.json", outside):
        assert Trust.of(root, [named]).trusts(root / "link.json")
    assert not Trust.of(root, [outside / "other.json"]).trusts(theirs)


def test_a_folder_file_that_is_a_link_from_elsewhere_gives_no_command(tmp_path):
    root = tmp_path / "project"
    command = {"argv": ["{python}", "train.py"], **READ}
    folder = root / "suite"
    write(folder / "reference.json", document([entry("job", command)], reference=True,
                                              hardware={"device": "cpu", "cpu": "Other CPU"}))
    machine = machines.Machine("cpu", "Test CPU 9000")
    theirs = write(tmp_path / "download" / "test-cpu.json", document([entry("job", {**command, "argv": ["sh"]})]))
    (folder / "test-cpu.json").symlink_to(theirs)
    chosen = machines.select(str(folder), machine, root / ".dlperf")
    assert chosen.selection.how == "matches" and Path(chosen.path).name == "test-cpu.json"
    (refused,) = baseline_refusals(chosen, Trust.of(root)).items()
    assert refused[0] == "job" and refused[1].startswith(f"{folder / 'test-cpu.json'}: $.cases[0].command: not run")
    # The same command as the reference's (a copy): it runs under the reference's trust.
    write(theirs, document([entry("job", command)]))
    assert baseline_refusals(machines.select(str(folder), machine, root / ".dlperf"), Trust.of(root)) == {}


def test_a_recorded_file_outside_the_rootdir_runs_the_reference_command_it_copied(tmp_path):
    root = tmp_path / "project"
    command = {"argv": ["{python}", "train.py"], **READ}
    folder = root / "suite"
    write(folder / "reference.json", document([entry("job", command)], hardware={"device": "cpu", "cpu": "Other"}))
    records = tmp_path / "records"  # dlperf_baseline_record outside the rootdir
    recorded = write(records / "suite" / "test-cpu-9000.json", document([entry("job", command)]))
    machine = machines.Machine("cpu", "Test CPU 9000")
    loaded = machines.select(str(folder), machine, records)
    assert loaded.selection.how == "recorded" and baseline_refusals(loaded, Trust.of(root)) == {}
    # Edited to run something else: its own command, from a file outside the rootdir, refused.
    write(recorded, document([entry("job", {**command, "argv": ["sh", "-c", "id"]})]))
    loaded = machines.select(str(folder), machine, records)
    assert list(baseline_refusals(loaded, Trust.of(root))) == ["job"]
    assert baseline_refusals(loaded, Trust.of(root, [records])) == {}


def test_a_recorded_file_that_links_out_of_the_record_folder_is_not_written_through(tmp_path):
    folder = write(tmp_path / "suite" / "reference.json", document([entry("tiny")], hardware={"device": "cpu"})).parent
    elsewhere = write(tmp_path / "elsewhere" / "precious.json", document([entry("other")]))
    (tmp_path / "records" / "suite").mkdir(parents=True)
    (tmp_path / "records" / "suite" / "test-cpu.json").symlink_to(elsewhere)
    with pytest.raises(OptionError, match=r"^dlperf_baseline_record: .*test-cpu.json is a link to .*precious.json, "
                                          r"outside .*records/suite"):
        machines.select(str(folder), machines.Machine("cpu", "Test CPU 9000"), tmp_path / "records")


def test_a_refused_command_never_starts_whoever_asks():
    spec = build_spec("job", command=["{python}", "-c", "pass"], parser="final", pattern=READ["pattern"])
    refused = types.SimpleNamespace(spec=dataclasses.replace(spec, refused="b.json: $.cases[0].command: not run"),
                                    case=None, params=None)
    with pytest.raises(RefusedCommand, match=r"^b.json: \$.cases\[0\].command: not run$"):
        execute(refused)


# --------------------------------------------------------------------------- sessions


def hostile(tmp_path: Path, marks: Path) -> Path:
    """A baseline outside the rootdir: a command that writes a marker by its argv, one by its env (a
    sitecustomize on PYTHONPATH), one by its cwd (the script there); and a figure for the tiny model."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(f"open({str(marks / 'env')!r}, 'w').write('ran')\n")
    (hooks / "writer.py").write_text(f"open({str(marks / 'cwd')!r}, 'w').write('ran')\nprint('ips 100')\n")
    argv = ["{python}", "-c", f"open({str(marks / 'argv')!r}, 'w').write('ran'); print('ips 100')"]
    return write(tmp_path / "shared" / "shared-baseline.json", document([
        entry("argv-job", {"argv": argv, **READ}),
        entry("env-job", {"argv": ["{python}", "-c", "print('ips 100')"], "env": {"PYTHONPATH": str(hooks)}, **READ}),
        entry("cwd-job", {"argv": ["{python}", "writer.py"], "cwd": str(hooks), **READ}),
        {"model": "tiny", "precision": "fp32", "batch_size": 8, "throughput": 1e9, "unit": "img/s"},
    ], hardware={"device": "cpu"}))


@pytest.fixture
def outside(dlperf, tmp_path_factory):
    base = tmp_path_factory.mktemp("elsewhere")
    marks = base / "marks"
    marks.mkdir()
    return hostile(base, marks), marks


def test_an_outside_baseline_command_is_refused_in_one_line_and_nothing_runs(dlperf, outside):
    path, marks = outside
    # A case that cannot run is a gap in a session that gates (issue 51): the session stops before any case runs,
    # naming each, and skips them only where --dlperf-allow-missing says so.
    stopped = dlperf.run("--dlperf-baseline", str(path))
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED
    stopped.stdout.fnmatch_lines(["dlperf: 3 selected case(s) cannot be measured here*",
                                  "  argv-job-fp32-bs8-gpu1: *: $.cases?0?.command: not run: *"])
    assert sorted(p.name for p in marks.iterdir()) == []
    result = dlperf.run("--dlperf-baseline", str(path), "-rs", "--dlperf-allow-missing")
    out = result.stdout.str()
    result.assert_outcomes(skipped=3, failed=1)
    for index, model in enumerate(("argv-job", "env-job", "cwd-job")):
        line = (f"dlperf: {path}: $.cases[{index}].command: not run: a baseline's command is code, and this file "
                f"lies outside the rootdir {dlperf.path.resolve()}; to run its commands, trust it: "
                f"--dlperf-trust-commands {path.resolve()} (or the ini key dlperf_trust_commands)")
        assert line in out.splitlines(), out
        assert out.index(line) < out.index("collected")  # before any case runs
        assert f"  {model}-fp32-bs8-gpu1: {line[len('dlperf: '):]}" in out.splitlines(), out  # its skip reason
    # Quiet too (-q shows no header).
    quiet = dlperf.run("-q", "--co", "--dlperf-baseline", str(path)).stdout.str()
    assert f"dlperf: {path}: $.cases[2].command: not run: a baseline's command is code" in quiet
    # The file's figures still gate: tiny is judged against its 1e9.
    assert "  FAIL tiny-fp32-bs8-gpu1: " in out and "100% below 1000000000.0" in out
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_same_file_runs_where_it_is_trusted(dlperf, outside):
    path, marks = outside
    only_commands = ("-k", "not tiny", "--dlperf-runs", "1", "--dlperf-max-runs", "1")
    # Named by the option (its folder, relative to where pytest runs).
    result = dlperf.run("--dlperf-baseline", str(path), "--dlperf-trust-commands",
                        os.path.relpath(path.parent, dlperf.path), *only_commands)
    result.assert_outcomes(passed=3, deselected=1)
    assert sorted(p.name for p in marks.iterdir()) == ["argv", "cwd", "env"]
    assert "not run" not in result.stdout.str()
    # Named by the ini key, relative to the ini file. (--dlperf-baseline=PATH: given as two arguments, pytest takes
    # an outside PATH for a test path and looks for its ini file above it, not in the project.)
    for mark in marks.iterdir():
        mark.unlink()
    relative = os.path.relpath(path, dlperf.path)
    (dlperf.path / "pytest.ini").write_text(f"[pytest]\ndlperf_trust_commands =\n    {relative}\n")
    dlperf.run(f"--dlperf-baseline={path}", *only_commands, "-k", "argv").assert_outcomes(passed=1, deselected=3)
    assert [p.name for p in marks.iterdir()] == ["argv"]
    # Inside the rootdir: the project's own file.
    (marks / "argv").unlink()
    (dlperf.path / "pytest.ini").unlink()
    shutil.copy(path, dlperf.path / "baseline.json")
    dlperf.run("--dlperf-baseline", "baseline.json", *only_commands, "-k", "argv").assert_outcomes(passed=1,
                                                                                                 deselected=3)
    assert [p.name for p in marks.iterdir()] == ["argv"]
    # A trusted path that does not exist trusts nothing: one line.
    bad = dlperf.run("--co", "--dlperf-baseline", str(path), "--dlperf-trust-commands", "no-such-folder")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dlperf-trust-commands: no-such-folder: no such file or folder" in bad.stderr.str()


def test_history_rows_are_figures_they_name_no_case_and_no_command(dlperf, tmp_path_factory):
    # --dlperf-baseline-from-history reads figures by the session's own case ids: a row of another case, with a
    # command object in its case and markup in its id, becomes no case and runs nothing.
    from pytest_dlperf import environment
    from pytest_dlperf.history.records import CaseRow, SessionRow, machine_class
    from pytest_dlperf.history.store import open_store

    marks = tmp_path_factory.mktemp("marks")
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'history.db'}"
    machine = machine_class("cpu", environment.collect(dlperf.path))
    command = {"argv": ["{python}", "-c", f"open({str(marks / 'argv')!r}, 'w')"], **READ}
    with open_store(url) as store:
        for night in range(3):
            row = SessionRow(id=f"s{night}", created=f"2026-11-0{night + 1}T02:00:00", machine=machine,
                             hostname="node1", gpu=None, driver=None, torch="2.14", git_commit=None, git_branch=None)
            store.append(row, [
                CaseRow("tiny-fp32-bs8-gpu1", {"model": "tiny", "precision": "fp32", "batch_size": 8, "gpus": 1,
                                               "settings": {}}, "img/s", 100.0, (100.0,), "pass"),
                CaseRow("job-fp32-bs8-gpu1</script>", {"model": "job", "precision": "fp32", "batch_size": 8,
                                                       "gpus": 1, "command": command}, "img/s", 1.0, (1.0,), "pass")])
    result = dlperf.run("--co", "--dlperf-model", "tiny", "--dlperf-batch-size", "8", "--dlperf-history", url,
                        "--dlperf-baseline-from-history", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert [line.strip() for line in result.stdout.lines if "DlperfItem" in line] == \
        ["<DlperfItem tiny-fp32-bs8-gpu1>"]
    assert list(marks.iterdir()) == []


def test_an_outside_folder_records_into_the_project_not_beside_itself(dlperf, tmp_path_factory):
    # pytest takes an outside --dlperf-baseline PATH (two arguments) for a test path, and its rootdir for a folder
    # above PATH: the default record folder (.dlperf/baselines under the rootdir) is the project's all the same.
    folder = tmp_path_factory.mktemp("shared") / "suite"
    write(folder / "other.json", document([entry("tiny")], hardware={"device": "cpu", "cpu": "No Such CPU 1"}))
    result = dlperf.run("--co", "--dlperf-baseline", str(folder))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "run unjudged and are recorded in .dlperf/baselines/suite/" in result.stdout.str(), result.stdout.str()


def test_a_baseline_s_text_cannot_drive_the_terminal_or_the_report(tmp_path):
    from pytest_dlperf.baseline import document as baseline_document
    from pytest_dlperf.reporting.markdown_tables import escape

    hostile = "NGC\x1b[2K\x1b[1A PASS everything \x9b31m"
    path = write(tmp_path / "b.json", document([{**entry("resnet50"), "source": hostile}],
                                               provenance={"source": hostile}))
    loaded = baseline_document.load(path)
    for text in (loaded.source, loaded.entries[0].expected("img/s").source):
        assert "\x1b" not in text and "\x9b" not in text and "\\x1b[2K" in text and "\\x9b31m" in text
    assert escape("<img src=x onerror=alert(1)> | a & b") == "&lt;img src=x onerror=alert(1)&gt; \\| a &amp; b"
