"""The transformer language models: registration, settings, batches, losses, training, FLOPs, a run."""

from __future__ import annotations

import math

import pytest

from pytest_dlperf.models import language as lm
from pytest_dlperf import models
from pytest_dlperf.cases import Case
from pytest_dlperf.worker.flops import count_training_flops

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# Small enough for a CPU step in well under a second, at every precision (fp16 included).
TINY_BERT = {"seq_len": 16, "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64}
TINY_GPT2 = {"seq_len": 16, "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2}


def _settings(name: str, overrides=None) -> dict:
    return models.get_model_spec(name).settings(overrides)


def test_registered_with_unit_optimizer_batch_and_the_transformers_extra():
    bert, tiny, gpt2 = (models.get_model_spec(n) for n in ("bert-base", "bert-tiny", "gpt2"))
    assert (bert.unit, bert.optimizer, bert.batch_size, bert.channels_last) == ("seq/s", "adamw", 32, False)
    assert (gpt2.unit, gpt2.optimizer, gpt2.batch_size, gpt2.channels_last) == ("tokens/s", "adamw", 8, False)
    assert tiny.factory is not bert.factory and tiny.loss is bert.loss and tiny.make_batch is bert.make_batch
    for spec in (bert, tiny, gpt2):
        assert spec.requires == {"transformers": "transformers"}
        assert spec.module == "pytest_dlperf.models.language"
    assert bert.settings()["seq_len"] == 128 and gpt2.settings()["seq_len"] == 1024
    assert {k: tiny.settings()[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "intermediate_size")} == {
        "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512}


def test_a_sequence_is_one_unit_for_bert_and_every_token_is_one_for_gpt2():
    assert models.get_model_spec("bert-base").samples_per_batch(64, _settings("bert-base", {"seq_len": 512})) == 64
    gpt2 = models.get_model_spec("gpt2")
    assert gpt2.samples_per_batch(8, gpt2.settings()) == 8 * 1024
    assert gpt2.samples_per_batch(8, gpt2.settings({"seq_len": 16})) == 8 * 16


def test_without_transformers_the_cases_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(models.registry, "module_available", lambda module: module != "transformers")
    for name in ("bert-base", "bert-tiny", "gpt2"):
        assert models.get_model_spec(name).missing_requirements() == [
            "needs the transformers extra (module 'transformers' is not installed)"]


def test_the_default_configs_are_the_published_ones():
    bert = models.create_model("bert-base").config
    assert (bert.hidden_size, bert.num_hidden_layers, bert.num_attention_heads, bert.intermediate_size,
            bert.vocab_size, bert.max_position_embeddings) == (768, 12, 12, 3072, 30522, 512)
    gpt2 = lm.gpt2_config(_settings("gpt2"))
    assert (gpt2.n_embd, gpt2.n_layer, gpt2.n_head, gpt2.n_inner, gpt2.vocab_size, gpt2.n_positions) == (
        768, 12, 12, None, 50257, 1024)


def test_settings_override_the_config():
    bert = models.create_model("bert-base", TINY_BERT)
    from transformers import BertForPreTraining

    assert isinstance(bert, BertForPreTraining)  # with NVIDIA's dense MLM head (models/language.py)
    assert (bert.config.hidden_size, bert.config.num_hidden_layers, bert.config.num_attention_heads,
            bert.config.intermediate_size, bert.config.vocab_size) == (32, 2, 2, 64, 512)
    assert len(bert.bert.encoder.layer) == 2
    assert bert.bert.encoder.layer[0].intermediate.dense.out_features == 64
    gpt2 = models.create_model("gpt2", {**TINY_GPT2, "max_position_embeddings": 64})
    assert type(gpt2).__name__ == "GPT2LMHeadModel"
    assert (gpt2.config.n_embd, gpt2.config.n_layer, gpt2.config.n_head, gpt2.config.vocab_size,
            gpt2.config.n_positions) == (32, 2, 2, 512, 64)
    assert gpt2.config.eos_token_id == 511 and len(gpt2.transformer.h) == 2


@pytest.mark.parametrize(("overrides", "message"), [
    ({"seq_len": 1024}, "seq_len=1024 is longer than max_position_embeddings=512; set max_position_embeddings"),
    ({"seq_len": 1}, "seq_len=1: a sequence needs 2 tokens at least"),
    ({"hidden_size": 100}, "hidden_size=100 is not a multiple of num_attention_heads=12"),
    ({"num_hidden_layers": "two"}, "num_hidden_layers='two': expected a positive integer"),
    ({"vocab_size": 0}, "vocab_size=0: expected a positive integer"),
    ({"seq_len": True}, "seq_len=True: expected a positive integer"),
])
def test_bad_settings_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        models.create_model("bert-base", overrides)
    with pytest.raises(ValueError, match="setting " + message.split(" ")[0]):
        lm.bert_batch(2, _settings("bert-base", overrides), "cpu")


def test_the_bert_batch_has_two_segments_a_mask_and_15_percent_mlm_labels():
    batch = lm.bert_batch(4, _settings("bert-base", {"seq_len": 40}), "cpu")
    ids, labels = batch["input_ids"], batch["labels"]
    assert ids.shape == labels.shape == batch["token_type_ids"].shape == (4, 40)
    assert int(ids.min()) >= 0 and int(ids.max()) < 30522
    assert batch["token_type_ids"][:, :20].eq(0).all() and batch["token_type_ids"][:, 20:].eq(1).all()
    assert batch["attention_mask"].eq(1).all()
    labelled = labels.ne(-100)
    assert labelled.sum(dim=1).tolist() == [6] * 4  # round(0.15 x 40) in every sequence
    assert torch.equal(labels[labelled], ids[labelled])
    assert batch["next_sentence_label"].shape == (4,) and set(batch["next_sentence_label"].tolist()) <= {0, 1}
    short = lm.bert_batch(2, _settings("bert-base", {"seq_len": 2}), "cpu")
    assert short["labels"].ne(-100).sum(dim=1).tolist() == [1, 1]  # never no label at all


def test_the_gpt2_targets_are_the_next_tokens():
    batch = lm.causal_lm_batch(3, _settings("gpt2", TINY_GPT2), "cpu")
    ids, targets = batch["input_ids"], batch["targets"]
    assert ids.shape == targets.shape == (3, 16)
    assert torch.equal(targets[:, :-1], ids[:, 1:]) and targets[:, -1].eq(-100).all()


def _grad_norm(module) -> float:
    return sum(float(p.grad.norm()) for p in module.parameters() if p.grad is not None)


def test_mlm_and_nsp_both_contribute_to_the_bert_loss():
    torch.manual_seed(0)
    settings = _settings("bert-base", TINY_BERT)
    model = models.create_model("bert-base", TINY_BERT).eval()  # no dropout: the same forward twice
    batch = lm.bert_batch(8, settings, "cpu")
    mlm, nsp = lm.bert_pretraining_losses(model, batch)
    # At random initialization: about ln(vocab) for the tokens, ln(2) for the sentence pairs.
    assert mlm.item() == pytest.approx(math.log(512), abs=0.5)
    assert nsp.item() == pytest.approx(math.log(2), abs=0.3)
    assert lm.bert_pretraining_loss(model, batch).item() == pytest.approx(mlm.item() + nsp.item(), rel=1e-5)
    nsp.backward(retain_graph=True)
    assert _grad_norm(model.cls.seq_relationship) > 0 and _grad_norm(model.cls.predictions.transform) == 0
    model.zero_grad(set_to_none=True)
    mlm.backward()
    assert _grad_norm(model.cls.predictions.transform) > 0 and _grad_norm(model.cls.seq_relationship) == 0


def test_the_mlm_loss_reads_only_the_labelled_positions():
    torch.manual_seed(0)
    model = models.create_model("bert-base", TINY_BERT).eval()  # no dropout: the same forward twice
    batch = lm.bert_batch(4, _settings("bert-base", TINY_BERT), "cpu")
    mlm, _ = lm.bert_pretraining_losses(model, batch)
    logits = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"]).prediction_logits
    labelled = batch["labels"].ne(-100)
    expected = torch.nn.functional.cross_entropy(logits[labelled], batch["labels"][labelled])
    assert mlm.item() == pytest.approx(expected.item(), rel=1e-5)


def test_the_built_in_bert_runs_the_mlm_head_on_the_masked_positions_only_and_gets_the_same_losses():
    # NVIDIA's recipe (DeepLearningExamples' BertPreTrainingHeads, dense sequence output): 8.6% faster on an H200.
    torch.manual_seed(0)
    spec = models.get_model_spec("bert-base")
    settings = _settings("bert-base", TINY_BERT)
    model = spec.factory(settings).eval()  # no dropout: the same forward each time
    batch = lm.bert_batch(4, settings, "cpu")
    masked = batch["masked_positions"]
    assert masked.shape == (4, 2) and torch.equal(batch["labels"].ne(-100).nonzero()[:, 1].view(4, 2), masked)
    seen = []
    model.cls.predictions.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape))
    calls = []
    model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(kwargs), with_kwargs=True)
    dense = lm.bert_dense_pretraining_losses(model, batch)
    full = lm.bert_pretraining_losses(model, batch)
    assert seen == [(4, 2, 32), (4, 16, 32)]  # the head saw 2 positions of each sequence (15%), then all 16
    assert [d.item() for d in dense] == pytest.approx([f.item() for f in full], rel=1e-5)
    assert spec.loss is lm.bert_dense_pretraining_loss
    # No attention mask reaches the model: transformers would read it on the host to drop it (a sync per step).
    assert all(call.get("attention_mask") is None for call in calls), calls


def _eval_loss(spec, step) -> float:
    """The loss of the step's batch without dropout (deterministic), in FP32."""
    step.model.eval()
    with torch.no_grad():
        loss = spec.loss(step.model, step.batch).item()
    step.model.train()
    return loss


@pytest.mark.parametrize("precision", ["fp32", "bf16", "amp"])
@pytest.mark.parametrize(("name", "overrides"), [("bert-tiny", TINY_BERT), ("gpt2", TINY_GPT2)])
def test_a_training_step_in_every_precision(name, overrides, precision):
    from pytest_dlperf.worker.training import TrainingStep

    torch.manual_seed(0)
    spec = models.get_model_spec(name)
    case = Case.make(name, precision, 4, 1, overrides)
    step = TrainingStep(spec, case, spec.settings(overrides), torch.device("cpu"))
    before = [p.detach().clone() for p in step.model.parameters()]
    initial = _eval_loss(spec, step)
    losses = []
    for _ in range(3):
        step()
        losses.append(step.last_loss.item())
    assert all(math.isfinite(x) for x in losses), losses
    assert _eval_loss(spec, step) < initial, "three steps on the same batch should lower its loss"
    changed = sum(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert changed == len(before), f"{len(before) - changed} parameter tensors never moved"
    assert step.scaler is not None if precision == "amp" else step.scaler is None


def _exact_bert_flops(s: int, h: int, layers: int, inter: int, vocab: int) -> int:
    """Matrix FLOPs of one BERT pretraining step per sequence (forward + twice for backward)."""
    masked = max(1, round(0.15 * s))  # the MLM head runs on the masked positions only (NVIDIA's recipe)
    per_token = layers * (4 * h * h + 2 * h * inter)  # the encoder, on every token
    per_masked = h * h + h * vocab  # MLM transform and decoder
    per_sequence = h * h + 2 * h  # pooler and NSP head, on the first token only
    attention = 2 * 2 * s * s * h * layers  # Q K^T and A V, summed over heads
    return 3 * (2 * (s * per_token + masked * per_masked + per_sequence) + attention)


def _exact_gpt2_flops_per_token(s: int, h: int, layers: int, vocab: int) -> int:
    per_token = layers * 12 * h * h + h * vocab  # qkv, projection, 4x MLP; the LM head
    attention = 2 * 2 * s * h * layers  # a token's row of Q K^T and A V (SDPA counts the full square)
    return 3 * (2 * per_token + attention)


@pytest.mark.parametrize(("seq_len", "gflop"), [(128, 69.8), (512, 301.0)])
def test_bert_base_flops_per_sequence(seq_len, gflop):
    spec = models.get_model_spec("bert-base")
    count = count_training_flops(spec, spec.settings({"seq_len": seq_len}))
    assert count.device == "meta"  # SDPA and the mask work on meta: attention is counted
    assert count.per_sample == _exact_bert_flops(seq_len, 768, 12, 3072, 30522)
    assert count.per_sample / 1e9 == pytest.approx(gflop, abs=0.05)
    # The usual estimate, 6 x parameters x tokens plus attention, with the 85M parameters of the encoder: the
    # embeddings are lookups, and the MLM decoder (23M) runs on 15% of the tokens.
    assert count.per_sample == pytest.approx(6 * 85e6 * seq_len, rel=0.1 if seq_len == 128 else 0.2)


def test_gpt2_flops_are_per_token():
    spec = models.get_model_spec("gpt2")
    count = count_training_flops(spec, spec.settings())
    assert count.device == "meta"
    assert count.per_sample == _exact_gpt2_flops_per_token(1024, 768, 12, 50257)
    assert count.per_sample / 1e9 == pytest.approx(0.854, abs=0.001)  # 875 GFLOP per 1024-token sequence
    assert count.per_batch == count.per_sample * count.per_batch_at * 1024
    small = spec.settings(TINY_GPT2)
    assert count_training_flops(spec, small).per_sample == _exact_gpt2_flops_per_token(16, 32, 2, 512)


def test_bert_tiny_flops_follow_its_config():
    spec = models.get_model_spec("bert-tiny")
    count = count_training_flops(spec, spec.settings({"seq_len": 16}))
    assert count.per_sample == _exact_bert_flops(16, 128, 2, 512, 30522)


def test_a_bert_tiny_case_runs_through_the_plugin(dlperf):
    result = dlperf.run("--dlperf-model", "bert-tiny", "--dlperf-set", "seq_len=16", "--dlperf-batch-size", "4",
                        "--dlperf-warmup-steps", "1", "--dlperf-steps", "3", "--dlperf-json", "results.json", "-v")
    result.assert_outcomes(passed=1)
    record = dlperf.results()["cases"][0]
    assert record["id"] == "bert-tiny-fp32-bs4-gpu1-seq16" and record["unit"] == "seq/s"
    assert record["throughput"] > 0
    flops = record["flops"]
    assert flops["flops_per_sample"] == _exact_bert_flops(16, 128, 2, 512, 30522)
    assert flops["tflops"] == pytest.approx(flops["flops_per_sample"] * record["throughput"] / 1e12, rel=1e-9)
    result.stdout.re_match_lines([
        r".*bert-tiny-fp32-bs4-gpu1-seq16 PASSED \(no baseline\).*",
        r"bert-tiny \(seq/s; .*",
        r"bert-tiny-fp32-bs4-gpu1-seq16 \| +[\d.e-]+ \| +- \| +- \| +\d+% \| +\d+ MiB$",
        r" +bert-tiny-fp32-bs4-gpu1-seq16: [\d.]+ seq/s, no baseline.*",
    ])
