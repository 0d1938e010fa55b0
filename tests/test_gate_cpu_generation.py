"""A machine class that means the same machine (issue 51): one CPU name ("AMD EPYC") covers generations 5x apart,
so a CPU's family and model numbers are part of its identity where both sides know them."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_dlperf import environment
from pytest_dlperf.baseline import machines
from pytest_dlperf.baseline.measured import hardware_from

from tests.fixtures import tiny_case

ZEN1, ZEN3 = "family 23 model 1", "family 25 model 1"


def write(folder: Path, name: str, signature: str | None, reference: bool = False) -> None:
    hardware = {"device": "cpu", "cpu": "AMD EPYC", "cpu_count": 2, "cpu_isa": "avx2"}
    hardware.update({"cpu_signature": signature} if signature else {})
    (folder / name).write_text(json.dumps({
        "schema_version": 1, "kind": "dlperf-baseline", "reference": reference, "hardware": hardware,
        "provenance": {"source": name}, "cases": [tiny_case(1.0)]}))


def test_a_folder_picks_the_file_of_this_cpus_generation(tmp_path):
    folder = tmp_path / "cpu"
    folder.mkdir()
    write(folder, "any.json", None, reference=True)
    write(folder, "zen1.json", ZEN1)
    write(folder, "zen3.json", ZEN3)
    for signature, picked in ((ZEN1, "zen1.json"), (ZEN3, "zen3.json"), ("family 26 model 2", "any.json")):
        machine = machines.Machine("cpu", "AMD EPYC", 2, "avx2", signature)
        assert Path(machines.select(str(folder), machine, tmp_path / "records").path).name == picked
    zen1 = machines.Machine("cpu", "AMD EPYC", 2, "avx2", ZEN1)
    assert not zen1.matches(machines.Machine("cpu", "AMD EPYC", 2, "avx2", ZEN3))
    assert zen1.matches(machines.Machine("cpu", "AMD EPYC", 2, "avx2"))  # a file of before: no generation given
    assert zen1.slug() == "amd-epyc-2cpus-avx2-f23m1" and zen1.describe() == "AMD EPYC, 2 CPUs, avx2, " + ZEN1


def test_this_machine_records_its_generation_in_the_environment_and_a_saved_baseline(tmp_path):
    env = environment.collect(tmp_path)
    signature = env["host"]["cpu_signature"]
    if Path("/proc/cpuinfo").exists() and "cpu family" in Path("/proc/cpuinfo").read_text():
        assert signature.startswith("family ") and " model " in signature
    hardware = hardware_from({**env, "device": {"type": "cpu"}})
    assert hardware.get("cpu_signature") == signature
    assert machines.this_machine("cpu", env).signature == signature
