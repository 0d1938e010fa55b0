"""Running out of CUDA memory: the failure message, and the largest-batch search under a CUDA cap."""

from __future__ import annotations

from .support import GPU_TEST, first_run, first_visible_nvml_device

pytestmark = GPU_TEST

# ResNet-50 in FP32 keeps about 0.1 GB of activations per 224x224 image for the backward
# pass: 2048 images need about 200 GB, more than one H100 (80 GB) or H200 (141 GB) has.  No
# single tensor reaches 2**31 elements (the largest, 2048 x 64 x 112 x 112, is 1.6e9), so
# cuDNN fails for want of memory, not of 32-bit indexing.
TOO_LARGE = 2048


def test_out_of_memory_names_the_batch_size_and_the_gpu(gpu):
    name = first_visible_nvml_device()["name"]
    result = gpu.run("--dlperf-model", "resnet50,tiny", "--dlperf-batch-size", f"{TOO_LARGE},32",
                     "--dlperf-warmup-steps", "1", "--dlperf-steps", "2", "-o", "dlperf_repeats=1",
                     "--dlperf-json", "results.json", "-k", f"resnet50-fp32-bs{TOO_LARGE} or tiny-fp32-bs32")
    # The case after the one that ran out of memory trains in a fresh process and passes.
    result.assert_outcomes(failed=1, passed=1)
    message = f"resnet50-fp32-bs{TOO_LARGE}-gpu1: out of memory at batch size {TOO_LARGE} on cuda:0 ({name}): "
    result.stdout.fnmatch_lines([f"*{message}*out of memory*"])
    records = {r["id"]: r for r in gpu.results()["cases"]}
    oom = records[f"resnet50-fp32-bs{TOO_LARGE}-gpu1"]
    assert oom["verdict"] == "error"
    run = first_run(oom)
    assert run["status"] == "oom" and run["returncode"] == 3
    assert run["device"] == {"type": "cuda", "name": name, "index": 0}
    assert records["tiny-fp32-bs32-gpu1"]["verdict"] == "no-baseline"


def test_the_largest_batch_search_under_a_cuda_memory_cap(gpu):
    # tiny at 256x256 keeps several MiB per image for its backward pass: under a 1 GiB cap the
    # largest batch is some dozens of images, where the whole GPU would take thousands.
    cap = 2**30
    result = gpu.run("--dlperf-model", "tiny", "--dlperf-batch-size", "max", "--dlperf-set", "image_size=256",
                     "--dlperf-max-memory", "1GiB", "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tiny-fp32-bsmax-gpu1-* (bs=max_*): *"])
    record = gpu.results()["cases"][0]
    search = record["max_batch"]
    assert search["memory_cap"] == cap and search["error"] is None
    assert search["stopped"] == "resolution reached", search
    outcomes = {t["outcome"] for t in search["trials"]}
    assert outcomes == {"ok", "oom"}, search["trials"]  # no trial crashed
    chosen, smallest_oom = search["chosen"], search["smallest_oom"]
    assert 1 <= chosen < smallest_oom <= 512, search
    assert smallest_oom - chosen <= max(1, chosen // 16), search  # the search's resolution
    assert {"batch_size": chosen, "outcome": "ok"}.items() <= next(
        t for t in search["trials"] if t["batch_size"] == chosen).items()
    for trial in search["trials"]:
        if trial["outcome"] == "oom":
            # torch's caching allocator, stopped by the per-process memory fraction
            assert "out of memory" in trial["message"].lower(), trial
    # The case itself trains the chosen batch, without the cap.
    run = first_run(record)
    assert run["windows"][0]["samples"] == chosen * run["windows"][0]["steps"]
    assert run["memory_cap"] is None
