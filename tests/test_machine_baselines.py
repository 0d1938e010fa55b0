"""Baselines per machine class: a folder picks the file of this machine, or records one; CPU names compared.

The same case can run 10x faster on one CPU than on another (fp16 autocast on an AMD EPYC and
on a Xeon with AVX-512 FP16), so ``--dlperf-baseline DIR`` judges a case only against figures
measured on this machine class.  The plugin runs here train ``tiny`` for a few steps on the
CPU; their verdicts are made certain by baseline figures far from anything measured (1 img/s,
1e9 img/s), never by timing.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_dlperf import environment, jsonio
from pytest_dlperf.baseline import machines
from pytest_dlperf.baseline.hardware import same_cpu_model
from pytest_dlperf import baseline as baseline_mod
from pytest_dlperf.cases import OptionError

from tests.fixtures import tiny_case

ROOT = Path(__file__).parent.parent
OTHER_CPU = "Fictional(R) Quantum(R) QX-9000 CPU @ 9.90GHz"  # no machine of this world
ONE_LINE = "dlperf: device cpu, "


def this_cpu(path) -> tuple[str, int]:
    host = environment.collect(path)["host"]
    return host["cpu"], host["cpu_count"]


def this_machine(path) -> machines.Machine:
    """This machine as a baseline folder sees it: CPU model, count and instruction set."""
    return machines.this_machine("cpu", environment.collect(path))


def suite(dlperf, *files: tuple[str, dict, list], folder: str = "suite") -> str:
    """A baseline folder of ``(name, hardware, cases)`` files; the first is the reference."""
    (dlperf.path / folder).mkdir()
    for index, (name, hardware, cases) in enumerate(files):
        top = {"reference": True} if index == 0 and len(files) > 1 else {}
        dlperf.baseline(cases, name=f"{folder}/{name}", hardware=hardware, defaults={"tolerance": 0.5}, **top)
    return folder


def cpu_hardware(model: str, count: int | None = None) -> dict:
    return {"device": "cpu", "cpu": model, **({"cpu_count": count} if count else {})}


def lines_with(result, text: str) -> list[str]:
    return [line for line in result.outlines if text in line]


# --------------------------------------------------------------------------- names and machines


@pytest.mark.parametrize("a, b, same", [
    ("AMD EPYC", "AMD EPYC 7B13 64-Core Processor", True),  # a virtual machine's name, the host's
    ("AMD EPYC 7B13", "AMD EPYC 7B13 64-Core Processor", True),
    ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "intel xeon platinum 8481c", True),
    ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", False),
    ("AMD EPYC", "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", False),
    ("Intel", "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", False),  # a vendor alone is no model
    ("aarch64", "aarch64", True),  # /proc/cpuinfo without a model name: Python's machine
])
def test_cpu_names_compare_without_trademarks_clock_and_core_count(a, b, same):
    assert same_cpu_model(a, b) is same
    assert same_cpu_model(b, a) is same


def test_a_machine_matches_by_cpu_model_and_count_or_by_gpu_model_whatever_the_count():
    epyc2 = machines.Machine("cpu", "AMD EPYC 7B13 64-Core Processor", 2)
    assert epyc2.matches(machines.Machine("cpu", "AMD EPYC", 2))
    assert epyc2.matches(machines.Machine("cpu", "AMD EPYC"))  # a file without cpu_count: any count
    assert not epyc2.matches(machines.Machine("cpu", "AMD EPYC", 16))
    assert not epyc2.matches(machines.Machine("cuda", "AMD EPYC"))
    assert epyc2.slug() == "amd-epyc-7b13-2cpus"
    # The same name with another instruction set is another CPU (where both say theirs).
    zen4 = machines.Machine("cpu", "AMD EPYC", 2, "avx2 avx512f avx512_bf16")
    zen3 = machines.Machine("cpu", "AMD EPYC", 2, "avx2")
    assert not zen3.matches(zen4) and not zen4.matches(zen3)
    assert zen3.matches(machines.Machine("cpu", "AMD EPYC", 2, "avx2")) and zen3.matches(epyc2) and epyc2.matches(zen4)
    assert zen4.matches(machines.Machine("cpu", "AMD EPYC", 2, "avx512_bf16 avx2 avx512f"))  # a set, any order
    assert zen4.slug() == "amd-epyc-2cpus-avx512-bf16" and zen4.describe() == "AMD EPYC, 2 CPUs, avx2 avx512f avx512_bf16"
    h100 = machines.Machine("cuda", "NVIDIA H100 80GB HBM3")
    assert h100.matches(machines.Machine("cuda", "H100 80GB HBM3")) and h100.slug() == "h100-80gb-hbm3"
    a100 = machines.Machine("cuda", "NVIDIA A100-SXM4-80GB")
    assert a100.matches(machines.Machine("cuda", "A100"))
    assert not a100.matches(machines.Machine("cuda", "NVIDIA A10"))
    assert not machines.Machine("cuda", "Tesla V100-SXM2-16GB").matches(machines.Machine("cuda", "V100-SXM2-32GB"))


def gpu_folder(tmp_path) -> Path:
    folder = tmp_path / "resnet"
    folder.mkdir()
    entry = {"model": "tiny", "precision": "amp", "batch_size": 32, "gpus": 1, "unit": "img/s"}
    for name, gpu, figure, reference in [("v100.json", "Tesla V100-SXM2-16GB", 100.0, True),
                                         ("a100.json", "NVIDIA A100-SXM4-80GB", 300.0, False)]:
        (folder / name).write_text(json.dumps({
            "schema_version": 1, "kind": "dlperf-baseline", "reference": reference,
            "hardware": {"device": "cuda", "gpu": gpu}, "provenance": {"source": name},
            "cases": [{**entry, "throughput": figure}]}))
    return folder


@pytest.mark.parametrize("gpu, picked", [
    ("NVIDIA A100-SXM4-80GB", "a100.json"),
    ("A100-SXM4-80GB", "a100.json"),
    ("Tesla V100-SXM2-16GB", "v100.json"),
    ("V100-SXM2-16GB", "v100.json"),
])
def test_a_folder_picks_the_file_of_this_gpu(tmp_path, gpu, picked):
    loaded = machines.select(str(gpu_folder(tmp_path)), machines.Machine("cuda", gpu), tmp_path / "rec")
    assert Path(loaded.path).name == picked
    assert loaded.selection.how == "matches" and loaded.selection.record_path is None
    (entry,) = loaded.entries
    assert entry.unjudged is None and entry.throughput == (300.0 if picked == "a100.json" else 100.0)
    assert loaded.selection.line().endswith(f"matches this machine ({gpu})")


def test_a_folder_without_this_gpu_runs_the_reference_cases_unjudged(tmp_path):
    loaded = machines.select(str(gpu_folder(tmp_path)), machines.Machine("cuda", "NVIDIA H100 80GB HBM3"),
                             tmp_path / "rec")
    assert Path(loaded.path).name == "v100.json" and loaded.selection.how == "none"
    assert loaded.selection.record_path == tmp_path / "rec" / "resnet" / "h100-80gb-hbm3.json"
    (entry,) = loaded.entries
    assert entry.unjudged.startswith("not judged: no baseline for this machine (NVIDIA H100 80GB HBM3) in ")
    assert loaded.reference(entry.case) is None  # not a scaling reference either


def test_the_most_specific_matching_file_wins(tmp_path):
    folder = tmp_path / "cpu"
    folder.mkdir()
    for name, cpu, reference in [("epyc.json", "AMD EPYC", True), ("7b13.json", "AMD EPYC 7B13", False)]:
        (folder / name).write_text(json.dumps({
            "schema_version": 1, "kind": "dlperf-baseline", "reference": reference,
            "hardware": cpu_hardware(cpu), "provenance": {"source": name}, "cases": [tiny_case(1.0)]}))
    machine = machines.Machine("cpu", "AMD EPYC 7B13 64-Core Processor", 2)
    assert Path(machines.select(str(folder), machine, tmp_path).path).name == "7b13.json"
    machine = machines.Machine("cpu", "AMD EPYC 9B14 96-Core Processor", 2)
    assert Path(machines.select(str(folder), machine, tmp_path).path).name == "epyc.json"


def test_a_folder_needs_files_and_one_reference(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptionError, match="empty: a folder without baseline files"):
        machines.select(str(tmp_path / "empty"), machines.Machine("cpu", "AMD EPYC", 2), tmp_path)
    folder = gpu_folder(tmp_path)
    document = json.loads((folder / "v100.json").read_text())
    (folder / "v100.json").write_text(json.dumps({**document, "reference": False}))
    with pytest.raises(OptionError, match=r'0 of its 2 files say "reference": true; exactly one must'):
        machines.select(str(folder), machines.Machine("cuda", "A100"), tmp_path)


def test_two_cpus_that_differ_are_noted_as_two_gpus_are():
    measured = baseline_mod.measured_on(cpu_hardware("AMD EPYC"), {})
    intel = {"type": "cpu", "name": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"}
    assert baseline_mod.device_mismatch(measured, intel) == (
        "baseline measured on AMD EPYC; this machine has Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz")
    assert baseline_mod.device_mismatch(measured, {"type": "cpu", "name": "AMD EPYC 7B13 64-Core Processor"}) is None
    # The same name with another instruction set: noted too, where both sides say theirs.
    epyc = {"type": "cpu", "name": "AMD EPYC"}
    assert baseline_mod.device_mismatch(measured, epyc, "avx2 avx512f avx512_bf16", "avx2") == (
        "baseline measured on AMD EPYC (avx2 avx512f avx512_bf16); this machine has AMD EPYC (avx2)")
    assert baseline_mod.device_mismatch(measured, epyc, "avx2", "avx2") is None
    assert baseline_mod.device_mismatch(measured, epyc, None, "avx2") is None


# --------------------------------------------------------------------------- sessions


def test_a_folder_judges_against_the_file_of_this_cpu_and_says_so_in_one_line(dlperf):
    cpu, count = this_cpu(dlperf.path)
    described = this_machine(dlperf.path).describe()
    folder = suite(dlperf, ("other.json", cpu_hardware(OTHER_CPU), [tiny_case(1e9)]),
                   ("mine.json", cpu_hardware(cpu, count), [tiny_case(1.0)]))
    result = dlperf.run("--dlperf-baseline", folder, "--dlperf-max-runs", "1")
    result.assert_outcomes(passed=1)
    (line,) = lines_with(result, "suite/mine.json")
    assert line == (f"{ONE_LINE}baseline suite/mine.json: its hardware ({cpu}, {count} CPUs) matches this machine "
                    f"({described})")
    result.stdout.fnmatch_lines(["  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance *, 98% CI *, 1 run)"])
    assert not (dlperf.path / ".dlperf" / "baselines").exists()  # nothing to record


def test_a_new_machine_records_its_baseline_and_the_next_session_gates_against_it(dlperf):
    cpu, count = this_cpu(dlperf.path)
    described = this_machine(dlperf.path).describe()
    folder = suite(dlperf, ("other.json", cpu_hardware(OTHER_CPU), [tiny_case(1e9), tiny_case(1e9, batch_size=16)]))
    slug = this_machine(dlperf.path).slug()
    recorded = dlperf.path / ".dlperf" / "baselines" / "suite" / f"{slug}.json"

    # 1. No file describes this CPU: the figure of another is not used; the case is measured and recorded.
    result = dlperf.run("--dlperf-baseline", folder, "-k", "bs32", "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    (line,) = lines_with(result, "run unjudged")
    assert line == (f"{ONE_LINE}no baseline for this machine ({described}) in suite "
                    f"(other.json: another CPU model ({OTHER_CPU})): "
                    f"the cases of other.json run unjudged and are recorded in .dlperf/baselines/suite/{slug}.json "
                    "for the next run")
    result.stdout.fnmatch_lines([
        f"dlperf: recorded 1 case(s) of this machine ({described}) in .dlperf/baselines/suite/{slug}.json*; "
        "the next session of suite here gates against them",
        "no baseline in suite for this machine (1):",
        "  tiny-fp32-bs32-gpu1: * img/s, no baseline",
        f"      not judged: no baseline for this machine ({described}) in suite; recorded in "
        f".dlperf/baselines/suite/{slug}.json for the next run",
    ])
    assert "1e+09" not in result.stdout.str() and "1000000000" not in result.stdout.str()
    assert dlperf.results()["baseline"] is None and dlperf.results()["cases"][0]["verdict"] == "no-baseline"
    saved = json.loads(recorded.read_text())
    jsonio.validate(saved, "baseline")
    assert saved["hardware"]["cpu"] == cpu and saved["hardware"]["cpu_count"] == count
    assert saved["hardware"].get("cpu_isa") == this_machine(dlperf.path).isa
    (entry,) = saved["cases"]
    assert entry["batch_size"] == 32 and entry["tolerance"] == 0.5  # the reference's, as it was asked for

    # 2. The next session picks the recorded file: its figure judges, and the case it lacked is added.
    entry["throughput"] = 1.0
    recorded.write_text(json.dumps(saved))
    result = dlperf.run("--dlperf-baseline", folder, "--dlperf-max-runs", "1")
    result.assert_outcomes(passed=2)
    (line,) = lines_with(result, "recorded on this machine")
    assert line.startswith(f"{ONE_LINE}baseline .dlperf/baselines/suite/{slug}.json: recorded on this machine "
                           f"({described}, core ")  # the file has host probes: this host's were read to compare
    assert " GFLOP/s) on " in line
    assert line.endswith("; no file in suite matches it")
    result.stdout.fnmatch_lines([
        "  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance *",
        "*",
        "  tiny-fp32-bs16-gpu1: * img/s, no baseline",
        f"      not judged: .dlperf/baselines/suite/{slug}.json has no figure for this case yet; recorded there for "
        "the next run",
    ])
    saved = json.loads(recorded.read_text())
    assert [(c["batch_size"], c["throughput"]) for c in saved["cases"]][0] == (32, 1.0)  # kept, not re-measured
    assert [c["batch_size"] for c in saved["cases"]] == [32, 16]

    # 3. Much slower than this machine's own figure: it fails (-q: the line comes with the summary).
    saved["cases"][0]["throughput"] = 1e9
    recorded.write_text(json.dumps(saved))
    result = dlperf.run("--dlperf-baseline", folder, "-k", "bs32", "--dlperf-max-runs", "1", "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAIL tiny-fp32-bs32-gpu1: * img/s, 100% below 1000000000.0 (tolerance *, 1 run)"])
    assert len(lines_with(result, "recorded on this machine")) == 1


def test_a_model_that_raises_fails_on_a_machine_without_a_baseline(dlperf):
    dlperf.pytester.makeconftest(textwrap.dedent("""
        from torch import nn
        from pytest_dlperf import register_model

        class Broken(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(1, 1)

            def forward(self, x):
                raise ValueError("boom in forward")

        @register_model("broken", task="image-classification", batch_size=4)
        def broken(settings):
            return Broken()
    """))
    folder = suite(dlperf, ("other.json", cpu_hardware(OTHER_CPU),
                            [{"model": "broken", "precision": "fp32", "batch_size": 4, "throughput": 1.0}]))
    result = dlperf.run("--dlperf-baseline", folder, "-o", "dlperf_baseline_record=rec")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*broken-fp32-bs4-gpu1: the worker failed: ValueError: boom in forward*"])
    assert not (dlperf.path / "rec").exists()  # nothing measured, nothing recorded


def test_a_single_file_of_another_cpu_is_judged_with_the_mismatch_noted(dlperf):
    cpu, _ = this_cpu(dlperf.path)
    path = dlperf.baseline([tiny_case(1.0)], hardware=cpu_hardware(OTHER_CPU))
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-max-runs", "1")
    result.assert_outcomes(passed=1)
    note = f"baseline measured on {OTHER_CPU}; this machine has {cpu}"
    result.stdout.fnmatch_lines([
        "  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance 5%, 98% CI *, 1 run)",
        "      faster than the tolerance: *",
        f"      {note}",
        "dlperf: 1 improved",
        f"dlperf: {note}",
    ])


def test_an_unwritable_record_folder_is_a_usage_error_before_any_case(dlperf):
    folder = suite(dlperf, ("other.json", cpu_hardware(OTHER_CPU), [tiny_case(1.0)]))
    (dlperf.path / "afile").write_text("")
    result = dlperf.run("--dlperf-baseline", folder, "-o", "dlperf_baseline_record=afile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: dlperf_baseline_record: afile/suite/*.json: cannot write*"])


def test_saving_says_which_cases_are_too_noisy_for_their_tolerance(dlperf, monkeypatch):
    from pytest_dlperf.gate import tolerance

    monkeypatch.setattr(tolerance, "runs_to_pass", lambda *args, **kwargs: None)  # no number of runs would do
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "3", "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "dlperf: --dlperf-save-baseline: tiny-fp32-bs32-gpu1: its 3 runs varied *% (CV): too noisy for 5% here: no "
        "number of runs would pass an unchanged case (--dlperf-max-runs 10), so expect inconclusive verdicts; 10 runs "
        "decide a tolerance of *%: save it on a quieter machine, with more runs (--dlperf-runs), ask for "
        "--dlperf-tolerance *, or gate with pairs (--dlperf-against)",  # no host probe with the busy rule off (FAST)
        "dlperf: saved 1 case(s) as a baseline to saved.json",
        "dlperf: 1 of 1 saved case(s) varied too much for the 5% asked for to be decided within the run budget: the "
        "tolerance stays as asked; *",
    ])
    entry = json.loads((dlperf.path / "saved.json").read_text())["cases"][0]
    assert "tolerance" not in entry and len(entry["runs"]) == 3  # the tolerance as asked, the runs kept


# --------------------------------------------------------------------------- shipped files


def test_the_cpu_suite_folder_has_one_reference_file_of_a_named_cpu():
    loaded = machines.select(str(ROOT / "baselines" / "cpu-smoke"), machines.Machine("cpu", "AMD EPYC", 2),
                             ROOT / ".dlperf-test-never-written")
    assert loaded.selection.how == "matches" and Path(loaded.path).name == "amd-epyc.json"
    assert all(e.unjudged is None for e in loaded.entries)
    # Its figures are an AVX-512 EPYC's (bf16 faster than fp32): an "AMD EPYC" with avx2 alone runs them unjudged.
    zen3 = machines.select(str(ROOT / "baselines" / "cpu-smoke"), machines.Machine("cpu", "AMD EPYC", 2, "avx2"),
                           ROOT / ".dlperf-test-never-written")
    assert zen3.selection.how == "none" and all(e.unjudged for e in zen3.entries)
    zen4 = machines.select(str(ROOT / "baselines" / "cpu-smoke"),
                           machines.Machine("cpu", "AMD EPYC", 2, "avx2 avx512f avx512_bf16"),
                           ROOT / ".dlperf-test-never-written")
    assert zen4.selection.how == "matches"
    other = machines.select(str(ROOT / "baselines" / "cpu-smoke"),
                            machines.Machine("cpu", "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", 2),
                            ROOT / ".dlperf-test-never-written")
    assert other.selection.how == "none" and all(e.unjudged for e in other.entries)
    script = (ROOT / ".ci" / "cpu-suite").read_text()
    assert 'baseline="${DLPERF_BASELINE:-baselines/cpu-smoke}"' in script and '--dlperf-baseline "$baseline"' in script


def test_no_shipped_file_or_document_cites_a_path_outside_the_repository():
    texts = [*(ROOT / "baselines").rglob("*.json"), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for path in texts:
        text = path.read_text()
        assert "../shared" not in text and "shared/anchors" not in text, path
    v100 = json.loads((ROOT / "baselines" / "v100.json").read_text())
    sources = [v100["provenance"]["source"], *(c["source"] for c in v100["cases"])]
    assert all("seed 0" not in s for s in sources)
    for public in ("github.com/Oneflow-Inc/DLPerf", "reports/dlperf_benchmark_test_report_v1.md",
                   "PyTorch/LanguageModeling/BERT", "PyTorch/Classification/ConvNets/resnet50v1.5",
                   "PaddlePaddle's VGG16 reproduction report"):
        assert public in v100["provenance"]["source"], public
