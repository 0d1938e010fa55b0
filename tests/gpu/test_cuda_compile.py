"""``compile=true`` on CUDA: inductor's Triton kernels, the compile time kept out of the windows."""

from __future__ import annotations

from .support import GPU_TEST, files_under, first_run, only_case

pytestmark = GPU_TEST


def test_a_compiled_case_runs_triton_kernels_outside_the_windows(gpu, monkeypatch):
    cache = gpu.path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))  # a fresh cache: the compile is real
    result = gpu.run("--dlperf-model", "tiny", "--dlperf-precision", "amp", "--dlperf-set", "compile=true",
                     "--dlperf-warmup-steps", "0", "--dlperf-steps", "20",
                     "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    # The compile time is a note on its own line under the case's line (as tests/test_compile_layout.py reads it
    # on CPU; an H100 run of 2026-11-26 failed on the older one-line pattern).
    result.stdout.fnmatch_lines(["*tiny-amp-bs32-gpu1-compile: * img/s*",
                                 "      compile * s, outside the measured windows*"])
    record = only_case(gpu.results())
    run = first_run(record)
    assert run["device"]["type"] == "cuda" and run["settings"]["compile"] is True
    timing = run["timing"]
    assert 0 < timing["compile_seconds"] < timing["compile_steps_seconds"]
    assert record["compile_seconds"] > 0
    # Warm-up 0: the compiling step ran before the first window, not in it.
    assert max(w["seconds"] for w in run["windows"]) < timing["compile_seconds"]
    kernels = [p for p in files_under(cache, "*.py") if "@triton.jit" in p.read_text(errors="replace")]
    assert kernels, f"inductor wrote no Triton kernel under {cache}"


def test_bert_trains_with_its_cuda_recipe_on_one_rank_and_two_sharing_the_gpu(gpu):
    """bert's recipe on CUDA (ModelSpec.cuda_compile, docs/gpu.md): compiled with CUDA graphs and eager attention,
    said in the results; two ranks sharing the GPU over gloo run DDP through the compiled model too (the recipe
    must not break the multi-rank path that no lease with two GPUs has run)."""
    result = gpu.run("--dlperf-model", "bert-tiny", "--dlperf-precision", "amp", "--dlperf-batch-size", "16",
                     "--dlperf-set", "seq_len=64", "--dlperf-gpus", "1,2", "--dlperf-share-gpus",
                     "--dlperf-warmup-steps", "3", "--dlperf-steps", "10", "-o", "dlperf_repeats=2",
                     "--dlperf-json", "results.json")
    result.assert_outcomes(passed=2)
    for record in sorted(gpu.results()["cases"], key=lambda r: r["case"]["gpus"]):
        settings = first_run(record)["settings"]
        assert (settings["compile"], settings["compile_mode"]) == (True, "reduce-overhead"), settings
        assert record["compile"] == "reduce-overhead" and record["compile_seconds"] > 0, record["id"]
