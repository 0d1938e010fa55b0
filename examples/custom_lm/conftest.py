"""A small transformer of one's own, benchmarked twice: as a causal language model (tokens/s)
and as a sequence classifier (seq/s).

Run from this folder (a few seconds on a CPU):

    pytest -p no:cacheprovider -m dlperf --dlperf-model my-lm,my-classifier --dlperf-device cpu --dlperf-steps 5

``language-modeling`` makes ``{"input_ids": int64 [B, seq_len], "targets": int64 [B, seq_len]}``
(the targets are the next tokens); ``model(input_ids)`` returns logits ``[B, seq_len,
vocab_size]``; the loss is next-token cross entropy; every token counts (tokens/s).
``sequence-classification`` makes ``{"input_ids": int64 [B, seq_len], "labels": int64 [B]}``;
``model(input_ids)`` returns logits ``[B, num_labels]``; cross entropy; seq/s.  Both train
with AdamW.  The settings (``seq_len``, ``vocab_size``, ``hidden_size``, ...) can be changed
per run: ``--dlperf-set seq_len=128``.
"""

import torch
from torch import nn

from pytest_dlperf import register_model

SHAPE = {"seq_len": 32, "vocab_size": 512, "hidden_size": 32, "num_layers": 2, "num_heads": 2}


class Encoder(nn.Module):
    """Token and position embeddings and pre-norm transformer blocks; ``causal``: each token sees its past only."""

    def __init__(self, settings, causal: bool):
        super().__init__()
        hidden = settings["hidden_size"]
        self.causal = causal
        self.tokens = nn.Embedding(settings["vocab_size"], hidden)
        self.positions = nn.Embedding(settings["seq_len"], hidden)
        block = nn.TransformerEncoderLayer(hidden, settings["num_heads"], 4 * hidden, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, settings["num_layers"], enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        seq_len = input_ids.shape[1]
        x = self.tokens(input_ids) + self.positions(torch.arange(seq_len, device=input_ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(seq_len, device=input_ids.device) if self.causal else None
        return self.norm(self.blocks(x, mask=mask, is_causal=self.causal))


class CausalLM(nn.Module):
    def __init__(self, settings):
        super().__init__()
        self.encoder = Encoder(settings, causal=True)
        self.head = nn.Linear(settings["hidden_size"], settings["vocab_size"])

    def forward(self, input_ids):  # [B, seq_len] -> [B, seq_len, vocab_size]
        return self.head(self.encoder(input_ids))


class Classifier(nn.Module):
    def __init__(self, settings):
        super().__init__()
        self.encoder = Encoder(settings, causal=False)
        self.head = nn.Linear(settings["hidden_size"], settings["num_labels"])

    def forward(self, input_ids):  # [B, seq_len] -> [B, num_labels]
        return self.head(self.encoder(input_ids).mean(dim=1))


@register_model("my-lm", task="language-modeling", batch_size=8, defaults=SHAPE)
def my_lm(settings):
    """A two-layer causal transformer language model."""
    return CausalLM(settings)


@register_model("my-classifier", task="sequence-classification", batch_size=8, defaults={**SHAPE, "num_labels": 3})
def my_classifier(settings):
    """The same transformer, mean-pooled into three classes."""
    return Classifier(settings)
