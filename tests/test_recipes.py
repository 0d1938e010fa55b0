"""Issue 42: a model's recipe on CUDA (bert-base compiles with CUDA graphs and eager attention, chosen by
benchmarks/bert_recipes.py on an H200), the recipe a run trained with in its results and a saved entry, and a gate
across two recipes named in the verdict.

No GPU here: the choice is the pure function the worker calls (``worker.training.compile_settings``), the model
is built on the CPU, and the record and the note go through the documents that carry them.  tests/gpu runs a
bert-tiny case on CUDA with the recipe.
"""

from __future__ import annotations

import pytest

from pytest_dlperf import baseline as baseline_mod
from pytest_dlperf import jsonio
from pytest_dlperf.baseline import edit
from pytest_dlperf.cases import compile_label
from pytest_dlperf.models import get_model_spec, register_model
from pytest_dlperf.results.runs import Attempt, RunRecord
from pytest_dlperf.worker.training import compile_settings
from tests.test_markdown import GPU_ENV, document, record


def test_bert_compiles_with_cuda_graphs_on_cuda_unless_its_case_says_and_never_on_the_cpu():
    spec = get_model_spec("bert-base")
    assert spec.cuda_compile == "reduce-overhead" and get_model_spec("bert-tiny").cuda_compile == "reduce-overhead"
    assert compile_settings(spec, {}, "cuda") == {"compile": True, "compile_mode": "reduce-overhead"}
    assert compile_settings(spec, {}, "cpu") == {"compile": False}
    assert compile_settings(spec, {"compile": False}, "cuda") == {"compile": False}
    assert compile_settings(spec, {"compile": True, "compile_mode": "default"}, "cuda") == \
        {"compile": True, "compile_mode": "default"}
    assert compile_settings(spec, {"compile": True}, "cuda") == {"compile": True}  # torch's default mode
    # Every other built-in model trains eager unless its case says.
    assert compile_settings(get_model_spec("resnet50"), {}, "cuda") == {"compile": False}


def test_a_compiled_bert_uses_eager_attention_which_inductor_fuses():
    pytest.importorskip("transformers")
    spec = get_model_spec("bert-tiny")
    small = {"num_hidden_layers": 1, "vocab_size": 512}
    compiled = spec.factory(spec.settings({**small, "compile": True}))
    eager = spec.factory(spec.settings(small))
    assert compiled.config._attn_implementation == "eager"
    assert eager.config._attn_implementation == "sdpa"  # transformers' default, the faster one eager


def test_a_recipe_must_be_a_compile_mode():
    with pytest.raises(ValueError, match="model 'fastbert'.*cuda_compile"):
        register_model("fastbert", task="bert-pretraining", cuda_compile="fast", factory=lambda settings: None)


def run(settings):
    return RunRecord.from_dict({"index": 0, "windows": [{"throughput": 10.0}], "settings": settings})


def test_an_attempt_says_how_its_runs_trained():
    assert compile_label({"compile": False}) == "eager" and compile_label({}) == "eager"
    assert compile_label({"compile": True}) == "default"
    assert Attempt.from_runs([run({"compile": True, "compile_mode": "reduce-overhead"})] * 2, "seq/s").compile \
        == "reduce-overhead"
    assert Attempt.from_runs([run({"compile": True}), run({"compile": False})], "seq/s").compile == "mixed"
    assert Attempt.from_runs([run(None)], "seq/s").compile is None  # a command case: no settings


def test_a_gpu_entry_keeps_its_recipe_an_update_replaces_it_and_a_gate_across_two_is_named():
    records = [{**record(1, 3635.0), "device": {"type": "cuda", "name": "NVIDIA H200"}, "compile": "reduce-overhead"},
               {**record(2, 900.0), "device": {"type": "cpu", "name": "AMD EPYC"}, "compile": "eager"}]
    saved = baseline_mod.from_measurements(records, GPU_ENV)
    jsonio.validate(saved, "baseline")
    gpu, cpu = saved["cases"]
    assert gpu["compile"] == "reduce-overhead" and "compile" not in cpu  # the recipe matters where a GPU waits
    assert baseline_mod.index(None, saved)[0].compile == "reduce-overhead"
    note = baseline_mod.compile_mismatch("eager", "reduce-overhead")
    assert note.startswith("baseline measured eager; these runs trained compiled (reduce-overhead)")
    assert baseline_mod.compile_mismatch("eager", "eager") is None
    assert baseline_mod.compile_mismatch(None, "eager") is None  # an entry saved before it was recorded
    results = document([{**record(1, 2361.0), "device": {"type": "cuda", "name": "NVIDIA H200"},
                         "compile": "eager"}], GPU_ENV)
    jsonio.validate(results, "results")
    new, _ = edit.updated_baseline(saved, results, "results.json")
    assert new["cases"][0]["compile"] == "eager"
