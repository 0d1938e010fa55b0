"""A machine class that means the same machine: what a name does not say.

One name covers machines far apart: a VM's "AMD EPYC" covers CPU generations 5x apart, and an H100 capped at
500 W is not one at 700 W.  A baseline file whose host probes (core speed, memory bandwidth) are more than
``PROBE_FACTOR`` from this host's best reading, or a GPU file whose board (memory, power limit, highest SM clock)
differs by more than ``BOARD_SPREAD``, is another machine class: a folder does not pick it, and a file named on
its own is not judged against (its cases run, unjudged, and under CI a session that judged nothing fails).
The session tests give figures no host reaches (1e5 GFLOP/s), never a timing.
"""

from __future__ import annotations

import json

import pytest

from pytest_dlperf import environment
from pytest_dlperf.baseline import hardware, machines

from tests.fixtures import tiny_case

EPYC = dict(kind="cpu", model="AMD EPYC", cpus=2, isa="avx2")


def cpu_file(dlperf, name: str, cores: list[float | None], throughput: float = 1.0) -> str:
    """A baseline file of this host's CPU whose entries' core probes read ``cores`` (None: no probe)."""
    host = environment.collect(dlperf.path)["host"]
    (dlperf.path / name).parent.mkdir(exist_ok=True)
    cases = [tiny_case(throughput, batch_size=8 * (i + 1), **({"core_gflops": c} if c else {}))
             for i, c in enumerate(cores)]
    return dlperf.baseline(cases, name=name, schema_version=2, defaults={"tolerance": 0.5},
                           hardware={"device": "cpu", "cpu": host["cpu"], "cpu_count": host["cpu_count"]})


def test_host_probes_beyond_the_factor_say_another_machine_and_within_it_the_same():
    here = machines.Machine(**EPYC, core_gflops=20.0, memory_gbs=8.0)
    assert here.matches(machines.Machine(**EPYC, core_gflops=55.0, memory_gbs=3.0))  # within 3x, either way
    faster = machines.Machine(**EPYC, core_gflops=70.0)
    assert here.differs(faster) == ("its host's core speed (70 GFLOP/s) is 3.5x this host's (20 GFLOP/s): "
                                    "another machine")
    slower = machines.Machine(**EPYC, memory_gbs=2.0)
    assert "memory bandwidth (2 GB/s) is 0.25x this host's (8 GB/s)" in here.differs(slower)
    # The same CPU family and model on both sides: probes 3.5x apart are a busy moment, not another machine.
    same = dict(EPYC, signature="family 23 model 1")
    assert machines.Machine(**same, core_gflops=20.0).matches(machines.Machine(**same, core_gflops=70.0))
    assert not machines.Machine(**same, core_gflops=20.0).matches(
        machines.Machine(**dict(EPYC, signature="family 26 model 2"), core_gflops=70.0))
    # A side without probes is not compared: the names decide, as before.
    assert here.matches(machines.Machine(**EPYC)) and machines.Machine(**EPYC).matches(faster)
    assert here.describe() == "AMD EPYC, 2 CPUs, avx2, core 20 GFLOP/s"


@pytest.mark.parametrize("theirs, why", [
    (dict(memory_bytes=80 * 2**30, power_limit_w=700, max_sm_clock_mhz=1980), None),
    (dict(memory_bytes=80 * 2**30, power_limit_w=500, max_sm_clock_mhz=1980), "power limit is 500 W, this one's 700"),
    (dict(memory_bytes=94 * 2**30), "memory is 94 GiB, this one's 80 GiB"),
    (dict(max_sm_clock_mhz=1410), "highest SM clock is 1410 MHz"),
    ({}, None),  # a file that does not say: its name decides
])
def test_gpus_of_one_name_differ_by_their_board(theirs, why):
    mine = hardware.Board.from_fields(dict(memory_bytes=80 * 2**30, power_limit_w=700, max_sm_clock_mhz=1980))
    here = machines.Machine("cuda", "NVIDIA H100 80GB HBM3", board=mine)
    other = machines.Machine("cuda", "H100 80GB HBM3", board=hardware.Board.from_fields(theirs))
    found = here.differs(other)
    assert (found is None) if why is None else (why in found)
    assert not here.matches(machines.Machine("cuda", "NVIDIA A100-SXM4-80GB", board=mine))


def test_a_saved_gpu_baseline_keeps_its_board_and_a_folder_reads_it_back(tmp_path):
    from pytest_dlperf.baseline import hardware_from
    device = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984, "power_limit_w": 700,
              "max_sm_clock_mhz": 1980}
    env = {"device": {"type": "cuda", "name": device["name"]}, "gpus": {"count": 1, "devices": [device]}}
    saved = hardware_from(env)
    assert saved["gpu_memory_gib"] == 79.6 and saved["gpu_power_limit_w"] == 700 and saved["gpu_sm_clock_mhz"] == 1980
    here = machines.this_machine("cuda", {"gpus": {"model": device["name"], "count": 1, "devices": [device]}})
    assert here.board == hardware.Board(79.6, 700.0, 1980.0)
    capped = {**saved, "gpu_power_limit_w": 500}
    folder = tmp_path / "suite"
    folder.mkdir()
    for name, hw in (("h100.json", saved), ("h100-capped.json", capped)):
        (folder / name).write_text(json.dumps({
            "schema_version": 1, "kind": "dlperf-baseline", "hardware": hw, "provenance": {"source": "test"},
            "reference": name == "h100.json", "cases": [tiny_case(1.0)]}))
    loaded = machines.select(str(folder), here, tmp_path / "rec")
    assert loaded.selection.how == "matches" and loaded.path.endswith("/h100.json")
    capped_here = machines.Machine("cuda", device["name"], board=hardware.Board(79.6, 500.0, 1980.0))
    assert machines.select(str(folder), capped_here, tmp_path / "rec").path.endswith("h100-capped.json")


def test_a_folder_reads_this_host_only_where_a_file_has_probes_and_passes_over_a_file_3x_off(dlperf):
    asked = []

    def measure():
        asked.append(1)
        return 20.0, 8.0

    here = machines.this_machine("cpu", environment.collect(dlperf.path))
    plain = cpu_file(dlperf, "plain/a.json", [None])
    machines.select(str(dlperf.path / "plain"), here, dlperf.path / "rec", measure)
    assert not asked and plain  # no file with probes: nothing to compare, no probe read
    cpu_file(dlperf, "probed/fast.json", [70.0, 75.0, 64.0])
    loaded = machines.select(str(dlperf.path / "probed"), here, dlperf.path / "rec", measure)
    assert len(asked) == 1 + machines.AGAIN and loaded.selection.how == "none"  # a gap is read again before it stands
    assert "fast.json: its host's core speed (70 GFLOP/s) is 3.5x this host's (20 GFLOP/s): another machine" in (
        loaded.selection.line())


def test_a_file_3x_this_host_s_figures_is_not_judged_against_and_ci_fails(dlperf, monkeypatch):
    path = cpu_file(dlperf, "far.json", [1e5])  # no host's one core reaches 100 TFLOP/s
    monkeypatch.setenv("CI", "true")
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-max-runs", "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "dlperf: device cpu, baseline far.json not judged against: its host's core speed (1e+05 GFLOP/s) is *,*x this "
        "host's (* GFLOP/s): another machine (*); its cases run unjudged",
        "dlperf: this session was asked to gate and judged nothing: 1 case(s), none judged against a baseline "
        "(CI: the session fails)",
        "no baseline in far.json, measured on another machine (1):",
        "  tiny-fp32-bs8-gpu1: * img/s, no baseline",
        "      not judged: far.json: its host's core speed (1e+05 GFLOP/s) is *x this host's (* GFLOP/s): another "
        "machine"])
    # The same file with this host's own figure is judged (1 img/s: IMPROVED, whatever this host's speed).
    # This host's figure as the best of 30 readings: the default 7, read in a busy moment of the suite's own
    # workers, once came to 0.32x of what the session read a second later (21.8 against 68.1 GFLOP/s).
    near = cpu_file(dlperf, "near.json", [machines.hardware.host_figures(readings=30)[0]])
    judged = dlperf.run("--dlperf-baseline", near, "--dlperf-max-runs", "1")
    assert judged.ret == pytest.ExitCode.OK
    judged.stdout.fnmatch_lines(["  IMPROVED tiny-fp32-bs8-gpu1: *"])
