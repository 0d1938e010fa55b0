"""batch_size "max": the search's logic, ids, options, and a search under a CPU memory cap."""

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests.fixtures import tiny_case
from pytest_dlperf import baseline, jsonio
from pytest_dlperf.controller import batchsearch
from pytest_dlperf.worker import memory
from pytest_dlperf.controller.batchsearch import ERROR, OK, OOM, midpoint, resolution, search
from pytest_dlperf.cases import MAX_BATCH, Case, OptionError, matrix, parse_batch_sizes


def fits_up_to(limit, crash_at=None):
    """A fake trial: batches up to ``limit`` train, larger ones run out of memory."""
    def trial(batch):
        if batch == crash_at:
            return ERROR, f"segfault at {batch}"
        return (OK, None) if batch <= limit else (OOM, f"out of memory at {batch}")
    return trial


def tried(result):
    return [(t.batch_size, t.outcome) for t in result.trials]


# --------------------------------------------------------------------------- the search


def test_doubles_then_bisects_to_a_multiple_of_8_within_a_sixteenth():
    result = search(fits_up_to(147), 32)
    assert tried(result) == [(32, OK), (64, OK), (128, OK), (256, OOM), (192, OOM), (160, OOM), (144, OK),
                             (152, OOM)]
    assert (result.chosen, result.smallest_oom, result.stopped) == (144, 152, batchsearch.RESOLVED)
    assert result.error is None


def test_halves_when_the_default_already_runs_out_of_memory():
    result = search(fits_up_to(5), 32)
    assert tried(result) == [(32, OOM), (16, OOM), (8, OOM), (4, OK), (6, OOM), (5, OK)]
    assert result.chosen == 5


def test_out_of_memory_at_batch_1_is_an_error():
    result = search(fits_up_to(0), 4)
    assert result.chosen is None and result.stopped == batchsearch.FAILED
    assert result.error == "out of memory even at batch size 1: out of memory at 1"


def test_a_trial_that_crashes_ends_the_search_with_its_message():
    result = search(fits_up_to(1000, crash_at=64), 32)
    assert tried(result) == [(32, OK), (64, ERROR)]
    assert result.chosen is None and result.stopped == batchsearch.FAILED
    assert result.error == "the trial at batch size 64 failed: segfault at 64"
    assert result.to_dict()["trials"][1] == {"batch_size": 64, "outcome": "error", "seconds": 0.0,
                                             "message": "segfault at 64"}


def test_the_trial_and_batch_limits_keep_the_largest_batch_that_fit():
    result = search(fits_up_to(100), 32, max_trials=3)
    assert tried(result) == [(32, OK), (64, OK), (128, OOM)]
    assert (result.chosen, result.stopped) == (64, batchsearch.TRIAL_LIMIT)
    result = search(fits_up_to(10**6), 32, max_batch=100)
    assert tried(result) == [(32, OK), (64, OK), (100, OK)]
    assert (result.chosen, result.stopped) == (100, batchsearch.BATCH_LIMIT)
    result = search(fits_up_to(0), 32, max_trials=2)
    assert result.chosen is None and result.error == "no batch fit within 2 trials"


@pytest.mark.parametrize("start", [1, 7, 32, 256])
def test_the_choice_is_within_the_resolution_of_the_largest_batch_that_fits(start):
    for limit in range(1, 700):
        result = search(fits_up_to(limit), start, max_trials=100)
        assert result.stopped == batchsearch.RESOLVED
        assert result.chosen <= limit < result.smallest_oom
        assert result.smallest_oom - result.chosen <= resolution(result.chosen)
        if limit < 32 * start:  # up to 32x the default, the default trial limit is enough
            assert len(result.trials) <= batchsearch.MAX_TRIALS, (limit, tried(result))


def test_midpoints_prefer_multiples_of_8():
    assert midpoint(128, 256) == 192
    assert midpoint(144, 160) == 152
    assert midpoint(144, 152) == 148  # 144 is not strictly inside
    assert midpoint(4, 8) == 6
    assert resolution(144) == 9 and resolution(3) == 1


def test_the_search_is_cached_by_config_not_by_gpu_count():
    one, eight = Case.make("tiny", "amp", MAX_BATCH, 1), Case.make("tiny", "amp", MAX_BATCH, 8)
    assert batchsearch.config_key(one, "cpu", 2**30) == batchsearch.config_key(eight, "cpu", 2**30)
    assert batchsearch.config_key(one, "cpu", 2**30) != batchsearch.config_key(one, "cpu", 2**31)
    assert batchsearch.config_key(one, "cpu", None) != batchsearch.config_key(
        Case.make("tiny", "amp", MAX_BATCH, 1, {"image_size": 64}), "cpu", None)


# --------------------------------------------------------------------------- cases, options, schema


def test_max_cases_read_bsmax_and_round_trip():
    case = Case.make("resnet50", "amp", "max", 8)
    assert case.id == "resnet50-amp-bsmax-gpu8" and case.searches_batch
    assert Case.from_dict(case.to_dict()) == case and case.to_dict()["batch_size"] == "max"
    assert case.with_batch(144).id == "resnet50-amp-bs144-gpu8" and not case.with_batch(144).searches_batch
    assert case.same_config(Case.make("resnet50", "amp", "max", 1))
    assert [c.id for c in matrix(["tiny"], [], [MAX_BATCH, 8], [], lambda m: 32)] == [
        "tiny-fp32-bsmax-gpu1", "tiny-fp32-bs8-gpu1"]


def test_batch_size_option_takes_max():
    assert parse_batch_sizes("--dlperf-batch-size", "max,64, MAX") == ["max", 64, "max"]
    with pytest.raises(OptionError, match=r"--dlperf-batch-size: 'maximal' is not an integer or 'max'"):
        parse_batch_sizes("--dlperf-batch-size", "maximal")
    with pytest.raises(OptionError, match=r"--dlperf-batch-size: 0 is not allowed; expected an integer >= 1 or 'max'"):
        parse_batch_sizes("--dlperf-batch-size", "0")


def test_baseline_schema_takes_max_and_says_what_else_it_takes():
    document = {"schema_version": 1, "kind": "dlperf-baseline", "cases": [tiny_case(1.0, batch_size="max")]}
    jsonio.validate(document, "baseline")
    document["cases"][0]["batch_size"] = "biggest"
    with pytest.raises(jsonio.DocumentError, match=r"\$\.cases\[0\]\.batch_size: 'biggest' is not an integer "
                                                   r">= 1 or 'max'"):
        jsonio.validate(document, "baseline", "b.json")


def test_a_saved_baseline_keeps_max_and_notes_the_chosen_batch():
    record = {"case": Case.make("tiny", "fp32", MAX_BATCH, 2).to_dict(), "throughput": 10.0, "unit": "img/s",
              "max_batch": {"chosen": 144}}
    document = baseline.from_measurements([record], {"host": {"hostname": "here"}})
    jsonio.validate(document, "baseline")
    entry = document["cases"][0]
    assert entry["batch_size"] == "max" and entry["notes"] == "batch_size max: the search chose 144 per device"


@pytest.mark.parametrize(("text", "size"), [("2GiB", 2 * 2**30), ("1500MB", 1500 * 10**6), ("512 mib", 512 * 2**20),
                                            ("1.5G", 1_500_000_000), ("4096", 4096)])
def test_memory_sizes(text, size):
    assert memory.parse_size("--dlperf-max-memory", text) == size


@pytest.mark.parametrize("text", ["2GB!", "lots", "1.5XB", "0MB", ""])
def test_bad_memory_sizes_name_the_option_and_the_format(text):
    with pytest.raises(ValueError, match=r"--dlperf-max-memory: .* expected .*like 2GiB, 1500MB or 512MiB"):
        memory.parse_size("--dlperf-max-memory", text)


def test_bad_max_memory_is_a_usage_error(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-max-memory", "2 gigs", fast=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dlperf-max-memory: '2 gigs' is not a size; expected a number of bytes "
                                 "with an optional unit, like 2GiB, 1500MB or 512MiB"])


def test_max_ids_are_collected_from_options_and_baselines(dlperf):
    path = dlperf.baseline([tiny_case(100.0, batch_size="max", gpus=2)])
    result = dlperf.run("--collect-only", "-q", "--dlperf-baseline", path, "--dlperf-model", "tiny",
                        "--dlperf-batch-size", "max,8", "--dlperf-gpus", "1,2")
    ids = sorted(line.strip() for line in result.outlines if line.strip().startswith("dlperf::"))
    assert ids == ["dlperf::tiny-fp32-bs8-gpu1", "dlperf::tiny-fp32-bs8-gpu2", "dlperf::tiny-fp32-bsmax-gpu1",
                   "dlperf::tiny-fp32-bsmax-gpu2"]


def test_max_on_the_cpu_without_a_cap_skips_with_the_reason(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-batch-size", "max", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*tiny-fp32-bsmax-gpu1: batch size max on the CPU needs --dlperf-max-memory*"])


# --------------------------------------------------------------------------- a search through the plugin

# About 16 MiB per sample at its peak (4 MiB activations, kept for the backward pass, and
# their gradients): under a 240 MiB cap, batch 8 (the default) fits with room to spare and
# batch 16 does not.
HOG = textwrap.dedent("""
    import torch
    from torch import nn
    from pytest_dlperf import register_model

    class Hog(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))
            self.fc = nn.Linear(3 * 8 * 8, 2)

        def forward(self, x):
            wide = torch.tanh(x.flatten(1).repeat(1, 5461) * self.scale)  # 4 MiB per sample, twice
            return self.fc(x.flatten(1)) + wide.mean(1, keepdim=True)

    @register_model("hog", task="image-classification", batch_size=8,
                    defaults={"image_size": 8, "num_classes": 2})
    def hog(settings):
        return Hog()
""")


def test_a_search_under_a_cpu_memory_cap_measures_the_batch_it_chose(dlperf):
    dlperf.pytester.makeconftest(HOG)
    result = dlperf.run("--dlperf-model", "hog", "--dlperf-batch-size", "max", "--dlperf-gpus", "1,2",
                        "--dlperf-max-memory", "240MiB", "-o", "dlperf_max_batch_trials=3", "--dlperf-max-runs", "1",
                        "--dlperf-json", "results.json", "--junitxml", "junit.xml", "--dlperf-log-dir", "logs", "-v",
                        "--dlperf-warmup-steps", "1", "--dlperf-steps", "2", "-o", "dlperf_repeats=1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*hog-fp32-bsmax-gpu1 PASSED (no baseline)*",
                                 "*hog-fp32-bsmax-gpu2 PASSED (no baseline)*",
                                 "gpus | fp32 bs=max_* | fp32 bs=max_* speedup",
                                 "  hog-fp32-bsmax-gpu1 (bs=max_*): * img/s, no baseline*"])
    data = dlperf.results()
    jsonio.validate(data, "results")
    one, two = data["cases"]
    assert one["id"] == "hog-fp32-bsmax-gpu1" and one["case"]["batch_size"] == "max"
    found = one["max_batch"]
    chosen = found["chosen"]
    assert found["start"] == 8 and found["memory_cap"] == 240 * 2**20 and found["cached"] is False
    outcomes = {t["batch_size"]: t["outcome"] for t in found["trials"]}
    assert outcomes[8] == "ok" and outcomes[16] == "oom" and len(found["trials"]) == 3
    assert 1 < chosen < found["smallest_oom"] and outcomes[chosen] == "ok"
    assert f"(bs=max_{chosen})" in one["message"]
    run = one["attempts"][0]["runs"][0]
    assert [w["samples"] for w in run["windows"]] == [chosen * 2]
    # Only the trials run under the cap; the case is measured at the chosen batch without it.
    assert run.get("memory_cap") is None and one["parameters"]["max_memory"] is None
    assert data["options"]["max_memory"] == 240 * 2**20
    # The 2-rank case reuses the search: the same per-device batch, on each of its ranks.
    assert two["max_batch"] == dict(found, cached=True)
    assert [w["samples"] for w in two["attempts"][0]["runs"][0]["windows"]] == [2 * chosen * 2]
    assert two["scaling"]["reference_source"] == "this session"
    props = {p.get("name"): p.get("value") for p in ET.parse(dlperf.path / "junit.xml").iter("property")}
    assert props["dlperf_batch_size"] == str(chosen) and props["dlperf_max_batch_trials"] == "3"
    # The trial that ran out of memory did so as an out-of-memory (exit 3), not as a crash.
    trial = next((dlperf.path / "logs").glob("session-*/hog-fp32-bsmax-gpu1/max-batch/bs16/run0"))
    trial_result = json.loads((trial / "result-rank0.json").read_text())
    assert trial_result["status"] == "oom"
    assert trial_result["memory_cap"]["bytes"] == 240 * 2**20 and trial_result["memory_cap"]["how"] == "RLIMIT_AS"


# --------------------------------------------------------------------------- the CPU cap itself

CAPPED = textwrap.dedent("""
    import json, threading
    import torch
    from pytest_dlperf.worker import memory
    from pytest_dlperf.worker import main as worker

    torch.set_num_threads(4)
    cap = memory.cap_cpu(64 * 2**20)
    torch.ones(1 << 22).mul_(2).sum()  # a parallel operation under the cap: its OpenMP threads exist
    threads = int(open("/proc/self/status").read().split("Threads:")[1].split()[0])
    outcomes = []
    try:
        torch.empty(256 * 2**20, dtype=torch.uint8).fill_(1)
        outcomes.append("allocated")
    except Exception as exc:
        outcomes.append("oom" if worker.is_oom(exc) else repr(exc))
    try:
        bytearray(256 * 2**20)
        outcomes.append("allocated")
    except MemoryError:
        outcomes.append("MemoryError")
    print(json.dumps({"cap": cap, "threads": threads, "outcomes": outcomes}))
""")


def test_an_allocation_past_the_cpu_cap_is_an_out_of_memory_and_threads_still_start(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "capped.py"
    script.write_text(CAPPED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["outcomes"] == ["oom", "MemoryError"]
    assert report["threads"] >= 4  # the main thread and 3 OpenMP workers
    cap = report["cap"]
    assert cap["how"] == "RLIMIT_AS" and cap["limit_bytes"] == cap["base_bytes"] + 64 * 2**20
    assert cap["base_bytes"] > 2**30  # torch's own address space is not counted
