"""A machine class the user names (issue 51): ``--dlperf-machine NAME``, as asv's machine.json, not one inferred.

A baseline folder judges against the file of NAME (its hardware's ``"machine"``, else ``NAME.json``) whatever
the hardware, warning in the header line where the file's hardware is not this machine's; without one, the
figures are recorded as ``NAME.json`` and the next session of NAME picks them.  The history rows and the
results' environment carry NAME.  The sessions here train ``tiny`` for a few steps on the CPU; their verdicts
come from figures far from anything measured (1 img/s, 1e9 img/s), never from timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dlperf import environment, jsonio
from pytest_dlperf.baseline import machines, named
from pytest_dlperf.cases import OptionError
from pytest_dlperf.history.records import machine_class, results_session_row
from pytest_dlperf.history.store import store_for

from tests.fixtures import tiny_case

OTHER_CPU = "Fictional(R) Quantum(R) QX-9000 CPU @ 9.90GHz"  # no machine of this world
FAST_CASE = ("--dlperf-max-runs", "1")


def write(folder: Path, name: str, hardware: dict, throughput: float, reference: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({
        "schema_version": 1, "kind": "dlperf-baseline", "hardware": hardware, "provenance": {"source": name},
        "defaults": {"tolerance": 0.5}, **({"reference": True} if reference else {}),
        "cases": [tiny_case(throughput)]}))


def two_files(folder: Path) -> None:
    """``mine.json``: this host's CPU (the reference, a figure no CPU reaches: FAIL if judged); ``box.json``:
    another CPU, named ``box`` (1 img/s: IMPROVED)."""
    host = environment.collect(folder.parent)["host"]
    write(folder, "mine.json", {"device": "cpu", "cpu": host["cpu"], "cpu_count": host["cpu_count"]}, 1e9, True)
    write(folder, "box.json", {"device": "cpu", "cpu": OTHER_CPU, "machine": "box"}, 1.0)


# --------------------------------------------------------------------------- the folder's file of a name


def test_a_name_picks_its_file_although_another_matches_the_hardware(tmp_path):
    two_files(tmp_path / "suite")
    here = machines.this_machine("cpu", environment.collect(tmp_path))
    assert machines.select(str(tmp_path / "suite"), here, tmp_path / "rec").path.endswith("mine.json")
    loaded = machines.select(str(tmp_path / "suite"), here, tmp_path / "rec", name="box")
    assert Path(loaded.path).name == "box.json" and loaded.selection.how == "named"
    assert loaded.selection.record_path is None
    (entry,) = loaded.entries
    assert entry.throughput == 1.0 and entry.unjudged is None
    line = loaded.selection.line()
    assert line.startswith(f"baseline {tmp_path / 'suite' / 'box.json'}: the file of machine box (--dlperf-machine); "
                           f"warning: its hardware ({OTHER_CPU}) is not this machine's ({here.describe()}): another "
                           "CPU model")
    # Failing a file that says the name, the folder's NAME.json; several saying one name is refused.
    assert machines.select(str(tmp_path / "suite"), here, tmp_path / "rec", name="mine").path.endswith("mine.json")
    write(tmp_path / "suite", "box2.json", {"device": "cpu", "machine": "box"}, 1.0)
    with pytest.raises(OptionError, match=r'--dlperf-machine: 2 files of .* say "machine": "box" '
                                          r"\(box.json, box2.json\); expected one per machine"):
        machines.select(str(tmp_path / "suite"), here, tmp_path / "rec", name="box")


def test_a_file_of_this_hardware_is_picked_by_name_without_a_warning(tmp_path):
    two_files(tmp_path / "suite")
    here = machines.this_machine("cpu", environment.collect(tmp_path))
    gpu = machines.Machine("cuda", "NVIDIA H100 80GB HBM3")
    mine = machines.select(str(tmp_path / "suite"), here, tmp_path / "rec", name="mine")
    assert mine.selection.how == "named" and "warning" not in mine.selection.line()
    assert named.warning(gpu, machines.Machine("cuda", "Tesla V100-SXM2-16GB")).startswith(
        "; warning: its hardware (Tesla V100-SXM2-16GB) is not this machine's (NVIDIA H100 80GB HBM3): another GPU "
        "model")
    assert named.warning(gpu, machines.Machine("cuda", None, None)) == ""  # a file that names no GPU says nothing


@pytest.mark.parametrize("value", ["ci-box_2.large", "A100", "x" * 100])
def test_good_names(value):
    assert named.check(value) == value


@pytest.mark.parametrize("value", ["a/b", "..", ".hidden", "a b", "box\n", "é", "x" * 101])
def test_bad_names(value):
    with pytest.raises(OptionError, match=r"^--dlperf-machine: .* is not a machine name; expected 1 to 100 letters"):
        named.check(value)


def test_the_history_s_machine_class_is_the_name():
    env = {"host": {"cpu": "AMD EPYC", "cpu_count": 2}}
    assert machine_class("cpu", env) == "AMD EPYC, 2 CPUs"
    assert machine_class("cpu", env, "box") == "box"
    assert machine_class("cpu", {**env, "machine": "box"}) == "box"  # a results file's environment (history import)


# --------------------------------------------------------------------------- sessions


def named_session(shared_run):
    """One session of ``--dlperf-machine box`` against a folder of two files, with results and history."""
    return shared_run("named-box", "--dlperf-baseline", "suite", "--dlperf-machine", "box", *FAST_CASE,
                      "--dlperf-json", "results.json", "--dlperf-history", "history.db",
                      setup=lambda dlperf: two_files(dlperf.path / "suite"))


def test_a_session_judges_against_the_named_file_and_warns_in_its_header(shared_run):
    result = named_session(shared_run).result
    result.assert_outcomes(passed=1)
    described = machines.this_machine("cpu", environment.collect(Path.cwd())).describe()
    result.stdout.fnmatch_lines([
        f"dlperf: device cpu, baseline suite/box.json: the file of machine box (--dlperf-machine); warning: its "
        f"hardware ({OTHER_CPU}) is not this machine's ({described}): another CPU model; judged against it as "
        "--dlperf-machine says",
        "  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance 50%*",
    ])


def test_the_results_and_the_history_rows_carry_the_name(shared_run):
    run = named_session(shared_run)
    document = run.tester.results()
    jsonio.validate(document, "results")
    assert document["environment"]["machine"] == "box" and document["options"]["machine"] == "box"
    run.result.stdout.fnmatch_lines(["dlperf: history: 1 case(s) of this session (box) written to *"])
    with store_for(str(run.tester.path / "history.db")).open() as store:
        points = store.points()
    assert [p.session.machine for p in points] == ["box"] and points[0].case.verdict == "improved"
    assert results_session_row(document).machine == "box"  # dlperf history import reads the same class


def test_a_name_without_a_file_is_recorded_under_it_and_picked_next(dlperf):
    two_files(dlperf.path / "suite")
    recorded = dlperf.path / ".dlperf" / "baselines" / "suite" / "new-box.json"
    args = ("--dlperf-baseline", "suite", "--dlperf-machine", "new-box", *FAST_CASE)
    result = dlperf.run(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        'dlperf: device cpu, no baseline for machine new-box (--dlperf-machine) in suite (no file says "machine": '
        '"new-box" or is new-box.json): the cases of mine.json run unjudged and are recorded in '
        ".dlperf/baselines/suite/new-box.json for the next run",
        "*not judged: no baseline for machine new-box in suite; recorded in .dlperf/baselines/suite/new-box.json *",
    ])
    saved = json.loads(recorded.read_text())
    jsonio.validate(saved, "baseline")
    assert saved["hardware"]["machine"] == "new-box" and saved["name"] == "suite on new-box"
    saved["cases"][0]["throughput"] = 1.0  # a figure every CPU beats: IMPROVED, whatever this one's speed
    recorded.write_text(json.dumps(saved))
    again = dlperf.run(*args)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines([
        "dlperf: device cpu, baseline .dlperf/baselines/suite/new-box.json: the recorded file of machine new-box "
        "(--dlperf-machine)",
        "  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 *",
    ])


@pytest.mark.parametrize("given", [("--dlperf-machine", "a/b"), ("--dlperf-machine=",), ("-o", "dlperf_machine=a b")],
                         ids=["slash", "empty", "ini"])
def test_a_bad_name_is_one_usage_error_before_any_case(dlperf, given):
    result = dlperf.run("--dlperf-model", "tiny", *given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --dlperf-machine: "), result.stderr.lines
    assert "tiny-fp32" not in result.stdout.str()
