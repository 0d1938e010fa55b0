"""A model no task fits, with a batch and a loss of its own: a two-tower recommender.

Run from this folder (a few seconds on a CPU):

    pytest -p no:cacheprovider -m dlperf --dlperf-model my-recommender --dlperf-device cpu --dlperf-steps 5

Without a ``task``, ``register_model`` needs ``make_batch`` and ``loss`` (and takes ``unit``,
``optimizer`` and ``defaults``).  The worker calls them with positional arguments:

* ``make_batch(batch_size, settings, device)``, once, before the first step: returns the batch
  that every step reuses (a tensor, or a tuple, list or dict of them), made on ``device``;
* ``loss(model, batch)``, every step: returns the scalar loss tensor that the step
  back-propagates (autocast is already on under amp and bf16).
"""

import torch
import torch.nn.functional as F
from torch import nn

from pytest_dlperf import register_model


def click_batch(batch_size, settings, device):
    """Users, items and whether the user clicked the item: int64 [B], int64 [B], float32 [B]."""
    return {
        "users": torch.randint(0, settings["num_users"], (batch_size,), device=device),
        "items": torch.randint(0, settings["num_items"], (batch_size,), device=device),
        "clicked": torch.randint(0, 2, (batch_size,), device=device).float(),
    }


def click_loss(model, batch):
    """Binary cross entropy of the predicted click logits [B] against the clicks."""
    return F.binary_cross_entropy_with_logits(model(batch["users"], batch["items"]), batch["clicked"])


class TwoTower(nn.Module):
    def __init__(self, settings):
        super().__init__()
        dim = settings["embedding_dim"]
        self.users = nn.Sequential(nn.Embedding(settings["num_users"], dim), nn.Linear(dim, dim))
        self.items = nn.Sequential(nn.Embedding(settings["num_items"], dim), nn.Linear(dim, dim))

    def forward(self, users, items):  # -> click logits [B]
        return (self.users(users) * self.items(items)).sum(dim=1)


@register_model("my-recommender", make_batch=click_batch, loss=click_loss, unit="samples/s", optimizer="adamw",
                batch_size=128, defaults={"num_users": 500, "num_items": 1000, "embedding_dim": 16})
def my_recommender(settings):
    """User and item embeddings, a linear layer each, a dot product."""
    return TwoTower(settings)
