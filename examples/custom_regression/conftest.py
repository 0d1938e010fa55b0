"""A multilayer perceptron of one's own, benchmarked with the regression task (samples/s).

Run from this folder (a few seconds on a CPU):

    pytest -p no:cacheprovider -m dlperf --dlperf-model my-mlp --dlperf-device cpu --dlperf-steps 5

The task makes ``(features float32 [B, in_features], targets float32 [B, out_features])``;
``model(features)`` returns ``[B, out_features]``; the loss is the mean squared error; the
unit is samples/s (one row of the batch is one sample); the optimizer is AdamW.
"""

from torch import nn

from pytest_dlperf import register_model


@register_model("my-mlp", task="regression", batch_size=64,
                defaults={"in_features": 32, "out_features": 4, "hidden": 128})
def my_mlp(settings):
    """Two hidden layers of ``hidden`` units."""
    hidden = settings["hidden"]
    return nn.Sequential(
        nn.Linear(settings["in_features"], hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, settings["out_features"]),
    )
