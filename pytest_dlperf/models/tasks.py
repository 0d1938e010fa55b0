"""The generic tasks: language modelling, sequence classification and regression.

A task is the half of a training step that does not depend on the model: the synthetic
batch, the loss and the unit (:class:`~.registry.Task`).  ``image-classification`` lives
with the CNNs (:mod:`.vision`) and ``bert-pretraining`` with BERT (:mod:`.language`); the
three here take any ``nn.Module`` whose forward takes the batch's input tensor:

* ``language-modeling``: the batch is ``{"input_ids": int64 [B, seq_len], "targets": int64
  [B, seq_len]}``; ``model(input_ids)`` returns logits ``[B, seq_len, vocab_size]``; the
  loss is next-token cross entropy; tokens/s (every token of the batch); AdamW.
* ``sequence-classification``: ``{"input_ids": int64 [B, seq_len], "labels": int64 [B]}``;
  ``model(input_ids)`` returns logits ``[B, num_labels]``; cross entropy; seq/s; AdamW.
* ``regression`` (generic samples): ``(features float32 [B, in_features], targets float32
  [B, out_features])``; ``model(features)`` returns ``[B, out_features]``; mean squared
  error; samples/s; AdamW.

A model may return the tensor itself or an object with a ``.logits`` tensor (what a
Hugging Face ``...ForCausalLM`` or ``...ForSequenceClassification`` returns).  A returned
tensor of the wrong shape is a ``ValueError`` that gives the shape expected, not a
broadcast that silently computes another loss.  Batches are made once, on the device, from
``torch.randint`` and ``torch.randn``; they need no value read back, so the FLOP count can
build them on the ``meta`` device (:mod:`pytest_dlperf.worker.flops`).  docs/models.md
documents the contract and has a runnable example per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .registry import Task, register_batch_bytes, register_task

IGNORE_INDEX = -100  # cross entropy skips these targets (torch's default ignore_index)

LANGUAGE_MODELING = "language-modeling"
SEQUENCE_CLASSIFICATION = "sequence-classification"
REGRESSION = "regression"


def positive_int(settings: Mapping[str, Any], key: str) -> int:
    """``settings[key]`` as a positive int, or a ``ValueError`` that names the setting."""
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"setting {key}={value!r}: expected a positive integer")
    return value


def logits_of(output):
    """The tensor a model returned: itself, or its ``.logits`` (transformers' output objects)."""
    return getattr(output, "logits", output)


def _wrong_shape(task: str, what: str, tensor, expected: str) -> ValueError:
    got = f"{what} of shape {list(tensor.shape)}" if hasattr(tensor, "shape") else f"a {type(tensor).__name__}"
    return ValueError(f"{task}: the model returned {got}; expected {what} of shape {expected}")


# --------------------------------------------------------------------------- language modelling


def token_batch(batch_size: int, settings: Mapping[str, Any], device) -> dict[str, Any]:
    """Causal language modelling: ``{"input_ids": [B, seq_len], "targets": [B, seq_len]}``.

    ``input_ids`` are random token ids in ``[0, vocab_size)``; ``targets`` are the next token
    of each position, ``-100`` (ignored) after the last one.  Shifted here, once, so the
    loss does not copy the logits every step.
    """
    import torch
    import torch.nn.functional as F

    seq_len, vocab = positive_int(settings, "seq_len"), positive_int(settings, "vocab_size")
    if seq_len < 2:
        raise ValueError(f"setting seq_len={seq_len}: a sequence needs 2 tokens at least (one to predict the next)")
    input_ids = torch.randint(0, vocab, (batch_size, seq_len), device=device)
    targets = F.pad(input_ids[:, 1:], (0, 1), value=IGNORE_INDEX)
    return {"input_ids": input_ids, "targets": targets}


@register_batch_bytes(token_batch)
def token_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    return 2 * batch_size * positive_int(settings, "seq_len") * 8  # input_ids and targets, int64


def next_token_loss(model, batch: Mapping[str, Any]):
    """Cross entropy of ``model(input_ids)``'s logits ``[B, seq_len, vocab]`` against the next tokens."""
    import torch.nn.functional as F

    logits = logits_of(model(batch["input_ids"]))
    ids = batch["input_ids"]
    if getattr(logits, "ndim", None) != 3 or tuple(logits.shape[:2]) != tuple(ids.shape):
        raise _wrong_shape(LANGUAGE_MODELING, "logits", logits,
                           f"[batch, seq_len, vocab_size] = [{ids.shape[0]}, {ids.shape[1]}, vocab_size]")
    return F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten(), ignore_index=IGNORE_INDEX)


def tokens_per_sequence(settings: Mapping[str, Any]) -> int:
    """Units of throughput in one sequence: every token counts (tokens/s)."""
    return positive_int(settings, "seq_len")


register_task(Task(
    name=LANGUAGE_MODELING,
    make_batch=token_batch,
    loss=next_token_loss,
    unit="tokens/s",
    defaults={"seq_len": 1024, "vocab_size": 50257},  # GPT-2 small's
    optimizer="adamw",
    items_per_sample=tokens_per_sequence,
    description="causal LM: random token ids [B, seq_len], next-token cross entropy, every token counted",
))


# --------------------------------------------------------------------------- sequence classification


def labelled_token_batch(batch_size: int, settings: Mapping[str, Any], device) -> dict[str, Any]:
    """Sequence classification: ``{"input_ids": [B, seq_len], "labels": [B]}``.

    Token ids in ``[0, vocab_size)``, one label in ``[0, num_labels)`` per sequence.
    """
    import torch

    seq_len, vocab = positive_int(settings, "seq_len"), positive_int(settings, "vocab_size")
    labels = positive_int(settings, "num_labels")
    return {"input_ids": torch.randint(0, vocab, (batch_size, seq_len), device=device),
            "labels": torch.randint(0, labels, (batch_size,), device=device)}


@register_batch_bytes(labelled_token_batch)
def _labelled_token_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    return batch_size * (positive_int(settings, "seq_len") + 1) * 8  # input_ids and labels, int64


def sequence_classification_loss(model, batch: Mapping[str, Any]):
    """Cross entropy of ``model(input_ids)``'s logits ``[B, num_labels]`` against ``labels``."""
    import torch.nn.functional as F

    logits = logits_of(model(batch["input_ids"]))
    batch_size = batch["labels"].shape[0]
    if getattr(logits, "ndim", None) != 2 or logits.shape[0] != batch_size:
        raise _wrong_shape(SEQUENCE_CLASSIFICATION, "logits", logits, f"[batch, num_labels] = [{batch_size}, num_labels]")
    return F.cross_entropy(logits, batch["labels"])


register_task(Task(
    name=SEQUENCE_CLASSIFICATION,
    make_batch=labelled_token_batch,
    loss=sequence_classification_loss,
    unit="seq/s",
    defaults={"seq_len": 128, "vocab_size": 30522, "num_labels": 2},  # BERT-base's vocabulary, GLUE's length
    optimizer="adamw",
    description="random token ids [B, seq_len] and labels [B], cross entropy over num_labels",
))


# --------------------------------------------------------------------------- regression


def feature_batch(batch_size: int, settings: Mapping[str, Any], device):
    """Regression (generic samples): ``(features [B, in_features], targets [B, out_features])``, float32."""
    import torch

    features = torch.randn(batch_size, positive_int(settings, "in_features"), device=device)
    targets = torch.randn(batch_size, positive_int(settings, "out_features"), device=device)
    return features, targets


@register_batch_bytes(feature_batch)
def _feature_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    return batch_size * (positive_int(settings, "in_features") + positive_int(settings, "out_features")) * 4


def mse_loss(model, batch):
    """Mean squared error of ``model(features)`` (shape ``[B, out_features]``) against ``targets``."""
    import torch.nn.functional as F

    features, targets = batch
    output = logits_of(model(features))
    if tuple(getattr(output, "shape", ())) != tuple(targets.shape):
        raise _wrong_shape(REGRESSION, "an output", output, f"[batch, out_features] = {list(targets.shape)}")
    return F.mse_loss(output, targets)


register_task(Task(
    name=REGRESSION,
    make_batch=feature_batch,
    loss=mse_loss,
    unit="samples/s",
    defaults={"in_features": 64, "out_features": 1},
    optimizer="adamw",
    description="float features [B, in_features] and targets [B, out_features], mean squared error",
))
