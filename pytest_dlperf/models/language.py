"""Transformer language models: BERT pretraining (MLM + NSP) and GPT-2 causal language modelling.

The models are Hugging Face ``transformers``' own (``BertForPreTraining``,
``GPT2LMHeadModel``), built from a config with random weights: nothing is downloaded.
``transformers`` is an optional extra; without it these models' cases skip with the reason.

Every config knob a case may change is a setting, under the same name for both families
(``--dlperf-set num_hidden_layers=2`` shrinks either), with the published configs as defaults::

    setting                    bert-base  bert-tiny  gpt2          GPT2Config field
    seq_len                    128        128        1024          (the batch's length)
    vocab_size                 30522      30522      50257         vocab_size
    hidden_size                768        128        768           n_embd
    num_hidden_layers          12         2          12            n_layer
    num_attention_heads        12         2          12            n_head
    intermediate_size          3072       512        (4 x hidden)  (not a setting)
    max_position_embeddings    512        512        1024          n_positions

Data is synthetic, made on the device once (:mod:`pytest_dlperf.worker.training`):

* BERT: random token ids over the vocabulary, two segments (``token_type_ids`` 0 for the
  first half of the sequence, 1 for the second), an attention mask of ones (no padding), MLM
  labels at 15% of the positions of every sequence (at least one; ``-100`` elsewhere, as
  NVIDIA's ``max_predictions_per_seq=20`` at length 128 is a fixed count too) and a random
  next-sentence label.  The loss is the MLM cross entropy plus the NSP cross entropy.
  The built-in models follow NVIDIA's BERT pretraining recipe (DeepLearningExamples'
  ``BertPreTrainingHeads``, whose default is a dense sequence output): the MLM head projects
  only the masked positions onto the vocabulary (:func:`bert_dense_pretraining_losses`), not
  every position as transformers' ``BertForPreTraining`` does.  No attention mask is given to
  the model: the batch has no padding, and transformers reads a mask's values to see whether it
  may drop it, a host synchronization every step.  On an H200 (bert-base amp bs64,
  ``benchmarks/gpu_diagnose.py``, 2026-11-26) the two together trained 8.6% faster, 1,739 seq/s
  against 1,601.  That eager step still left an H200's GPU idle a quarter to half of the time at bs64 (the host
  set the pace): on CUDA the recipe is ``torch.compile`` in ``reduce-overhead`` mode (CUDA
  graphs; compiled once per worker, before the warm-up, outside the windows) with transformers' eager attention,
  which inductor fuses.  ``benchmarks/bert_recipes.py`` on an H200 (2026-11-27, 4 interleaved rounds): 3,635 seq/s
  at 98% GPU utilization, against 2,361 at 76% eager (sdpa attention), 3,380 at 96% compiled with sdpa, 3,184 at
  98% compiled without CUDA graphs.  ``--dlperf-set compile=false`` trains eager.  Throughput: sequences/s.
  Registered as the ``bert-pretraining`` task, which both BERT models name; a model of your own that
  names the task gets the task's loss (:func:`bert_pretraining_loss`: the head over every position of the
  output's ``prediction_logits``, and ``seq_relationship_logits``).
* GPT-2: the ``language-modeling`` task (:mod:`.tasks`): random token ids; each position
  predicts the next token (the last predicts nothing).  Throughput: tokens/s, every token
  of the batch (``ModelSpec.items_per_sample`` is ``seq_len``), so FLOPs are counted per
  token too.

Both train with AdamW (:func:`pytest_dlperf.worker.training.make_optimizer`), not LAMB.  DLPerf's
NGC PyTorch BERT runs, the figures in ``baselines/v100.json``, replaced NVIDIA's FusedLAMB
with apex's FusedAdam "to keep the algorithm consistent" across frameworks, so AdamW is
what those figures measured.  A LAMB in PyTorch would need apex's FusedLAMB or DeepSpeed's
FusedLamb (CUDA builds of their own), the unmaintained ``torch-optimizer`` or
``pytorch-lamb``, or ``timm.optim.Lamb`` (maintained, but a vision library as a dependency
for one optimizer); torch itself has none.  LAMB's step costs a few more element-wise
passes over the parameters than Adam's, small next to the forward and backward passes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .registry import Task, register_batch_bytes, register_model, register_task
from .tasks import IGNORE_INDEX, LANGUAGE_MODELING, positive_int, token_batch, token_batch_bytes

MLM_PROBABILITY = 0.15
BERT_PRETRAINING = "bert-pretraining"
REQUIRES = {"transformers": "transformers"}

# Config knobs as settings: shared names for BERT and GPT-2 (GPT2Config's own names differ).
_BERT_BASE = {
    "seq_len": 128,
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
}
# Google's BERT-Tiny (L=2, H=128, A=2; github.com/google-research/bert, "smaller models").
_BERT_TINY = {**_BERT_BASE, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512}
# GPT-2 small (124M parameters); the feed-forward width is 4 x hidden_size, as in every GPT-2.
_GPT2_SMALL = {
    "seq_len": 1024,
    "vocab_size": 50257,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "max_position_embeddings": 1024,
}


# --------------------------------------------------------------------------- settings


def _shape(settings: Mapping[str, Any]) -> dict[str, int]:
    """The integer knobs of a transformer's settings, checked against each other.

    A sequence needs two tokens at least (two segments for BERT, a next token for GPT-2)
    and must fit the position embeddings; the heads must split the hidden size evenly.
    """
    keys = [k for k in (*_BERT_BASE, *_GPT2_SMALL) if k in settings]
    shape = {key: positive_int(settings, key) for key in dict.fromkeys(keys)}
    if shape["seq_len"] < 2:
        raise ValueError(f"setting seq_len={shape['seq_len']}: a sequence needs 2 tokens at least")
    if shape["seq_len"] > shape["max_position_embeddings"]:
        raise ValueError(
            f"setting seq_len={shape['seq_len']} is longer than max_position_embeddings="
            f"{shape['max_position_embeddings']}; set max_position_embeddings too"
        )
    if shape["hidden_size"] % shape["num_attention_heads"]:
        raise ValueError(
            f"setting hidden_size={shape['hidden_size']} is not a multiple of "
            f"num_attention_heads={shape['num_attention_heads']}"
        )
    return shape


# --------------------------------------------------------------------------- BERT


def bert_config(settings: Mapping[str, Any]):
    """A ``transformers.BertConfig`` with ``BertConfig()``'s defaults and the settings' knobs."""
    from transformers import BertConfig

    shape = _shape(settings)
    return BertConfig(**{key: value for key, value in shape.items() if key != "seq_len"})


def bert_batch(batch_size: int, settings: Mapping[str, Any], device) -> dict[str, Any]:
    """One synthetic pretraining batch: two-segment sequences, MLM labels and NSP labels.

    Exactly ``max(1, round(0.15 x seq_len))`` positions of every sequence carry an MLM
    label (the token itself), so the MLM loss never averages over nothing; ``masked_positions``
    lists them (NVIDIA's ``masked_lm_positions``), for the dense MLM head.
    """
    import torch

    shape = _shape(settings)
    seq_len, vocab = shape["seq_len"], shape["vocab_size"]
    input_ids = torch.randint(0, vocab, (batch_size, seq_len), device=device)
    second_segment = torch.arange(seq_len, device=device) >= seq_len // 2
    token_type_ids = second_segment.long().expand(batch_size, seq_len).contiguous()
    masked_count = max(1, round(MLM_PROBABILITY * seq_len))
    masked = torch.rand(batch_size, seq_len, device=device).argsort(dim=1)[:, :masked_count]
    labels = torch.full_like(input_ids, IGNORE_INDEX).scatter(1, masked, input_ids.gather(1, masked))
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": torch.ones_like(input_ids),
        "labels": labels,
        "masked_positions": masked.sort(dim=1).values,
        "next_sentence_label": torch.randint(0, 2, (batch_size,), device=device),
    }


@register_batch_bytes(bert_batch)
def _bert_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    seq_len = _shape(settings)["seq_len"]
    masked_count = max(1, round(MLM_PROBABILITY * seq_len))
    # input_ids, token_type_ids, attention_mask, labels; masked_positions; next_sentence_label: all int64
    return batch_size * (4 * seq_len + masked_count + 1) * 8


def bert_pretraining_losses(model, batch: Mapping[str, Any]):
    """The MLM and NSP cross-entropy losses of ``model`` on ``batch``, as a pair of tensors.

    The head over every position (the output's ``prediction_logits``), the loss over the labelled
    ones. No attention mask is given: the batch's is all ones (no padding), which transformers
    would read on the host to drop it (a synchronization every step); without it the model does
    the same arithmetic.
    """
    import torch.nn.functional as F

    out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
    mlm = F.cross_entropy(out.prediction_logits.flatten(0, 1), batch["labels"].flatten(),
                          ignore_index=IGNORE_INDEX)
    nsp = F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"])
    return mlm, nsp


def bert_dense_pretraining_losses(model, batch: Mapping[str, Any]):
    """The MLM and NSP losses with NVIDIA's dense sequence output: the model (a
    :func:`dense_pretraining_class` instance) projects only the batch's ``masked_positions``
    onto the vocabulary. The same losses as :func:`bert_pretraining_losses`, with the head's
    vocabulary projection done for 15% of the positions."""
    import torch.nn.functional as F

    positions = batch["masked_positions"]
    out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], masked_positions=positions)
    mlm = F.cross_entropy(out.prediction_logits.flatten(0, 1), batch["labels"].gather(1, positions).flatten())
    nsp = F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"])
    return mlm, nsp


def bert_dense_pretraining_loss(model, batch: Mapping[str, Any]):
    """The built-in BERT models' pretraining loss: MLM (on the masked positions' outputs) plus NSP."""
    mlm, nsp = bert_dense_pretraining_losses(model, batch)
    return mlm + nsp


@functools.cache
def dense_pretraining_class():
    """``BertForPreTraining`` whose forward takes ``masked_positions`` and runs the MLM head on those
    positions only (DeepLearningExamples' ``sequence_output_is_dense``). A subclass, so DDP and
    ``torch.compile`` wrap its forward as they wrap any model's; transformers is imported here, not
    at import time."""
    import torch
    from transformers import BertForPreTraining
    from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

    class DenseBertForPreTraining(BertForPreTraining):
        def forward(self, input_ids, token_type_ids=None, attention_mask=None, masked_positions=None):
            out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
            hidden = out.last_hidden_state
            if masked_positions is not None:
                index = masked_positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
                hidden = torch.gather(hidden, 1, index)
            scores, relationship = self.cls(hidden, out.pooler_output)
            return BertForPreTrainingOutput(prediction_logits=scores, seq_relationship_logits=relationship)

    return DenseBertForPreTraining


def bert_pretraining_loss(model, batch: Mapping[str, Any]):
    """BERT's pretraining loss: MLM plus NSP (what ``BertForPreTraining`` returns with labels)."""
    mlm, nsp = bert_pretraining_losses(model, batch)
    return mlm + nsp


def _bert(settings: Mapping[str, Any]):
    """``BertForPreTraining`` on the settings' config, randomly initialized, with the dense MLM head
    (:func:`dense_pretraining_class`); compiled (``compile``), with transformers' eager attention, which inductor
    fuses, rather than scaled-dot-product attention, which it cannot look into (module docstring)."""
    model = dense_pretraining_class()(bert_config(settings))
    if settings.get("compile"):
        model.set_attn_implementation("eager")
    return model


# A task of its own, so that a user's BERT variant (any model whose output has
# ``prediction_logits`` and ``seq_relationship_logits``) can name it.
register_task(Task(
    name=BERT_PRETRAINING,
    make_batch=bert_batch,
    loss=bert_pretraining_loss,
    unit="seq/s",
    defaults=_BERT_BASE,
    optimizer="adamw",
    description="BERT's MLM + NSP: two-segment token ids, 15% MLM labels, a next-sentence label",
))

# Batch 32: DLPerf's FP32 batch for BERT-base on a 16 GB V100 (their largest was 48); it
# fits every precision there.  DLPerf's AMP runs used 64 (largest 96): baselines name it.
# The loss: NVIDIA's recipe, the MLM head on the masked positions only (the module docstring).
# On CUDA the recipe is compiled with CUDA graphs (the module docstring).
_BERT_REGISTRATION = {"task": BERT_PRETRAINING, "batch_size": 32, "requires": REQUIRES,
                      "loss": bert_dense_pretraining_loss, "cuda_compile": "reduce-overhead"}


@register_model("bert-base", defaults=_BERT_BASE, **_BERT_REGISTRATION)
def bert_base(settings):
    """BERT-base pretraining (MLM + NSP), transformers' BertForPreTraining on BertConfig(), the MLM head on
    the masked positions (NVIDIA's recipe); seq/s."""
    return _bert(settings)


@register_model("bert-tiny", defaults=_BERT_TINY, **_BERT_REGISTRATION)
def bert_tiny(settings):
    """Google's BERT-Tiny (2 layers, hidden 128, 2 heads) pretraining, for CPU runs; seq/s."""
    return _bert(settings)


# --------------------------------------------------------------------------- GPT-2


def gpt2_config(settings: Mapping[str, Any]):
    """A ``transformers.GPT2Config`` with ``GPT2Config()``'s defaults and the settings' knobs."""
    from transformers import GPT2Config

    shape = _shape(settings)
    vocab = shape["vocab_size"]
    # GPT-2's <|endoftext|> is the vocabulary's last token (50256): keep it inside a smaller one.
    return GPT2Config(vocab_size=vocab, n_embd=shape["hidden_size"], n_layer=shape["num_hidden_layers"],
                      n_head=shape["num_attention_heads"], n_positions=shape["max_position_embeddings"],
                      bos_token_id=vocab - 1, eos_token_id=vocab - 1)


def causal_lm_batch(batch_size: int, settings: Mapping[str, Any], device) -> dict[str, Any]:
    """The ``language-modeling`` task's batch (:func:`.tasks.token_batch`), with GPT-2's settings checked.

    Random token ids and their targets: the next token, ``-100`` after the last one.
    """
    _shape(settings)
    return token_batch(batch_size, settings, device)


@register_batch_bytes(causal_lm_batch)
def _causal_lm_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    _shape(settings)  # as causal_lm_batch: GPT-2's settings checked, then the task's batch
    return token_batch_bytes(batch_size, settings)


# Batch 8 (8 x 1024 tokens): the Hugging Face Trainer's default per-device batch.  By estimate,
# not measured here: about 10 GB under AMP, 15 GB in FP32 (the FP32 logits alone are 1.6 GB).
# The task gives the loss (next-token cross entropy), tokens/s with every token counted, and AdamW.
@register_model("gpt2", task=LANGUAGE_MODELING, defaults=_GPT2_SMALL, make_batch=causal_lm_batch,
                batch_size=8, requires=REQUIRES)
def gpt2(settings):
    """GPT-2 small (124M) causal language modelling, transformers' GPT2LMHeadModel; tokens/s."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel(gpt2_config(settings))
