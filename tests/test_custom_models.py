"""A model of one's own (docs/models.md): the tasks' batches and losses, what register_model
refuses and why, and the examples under examples/ run for real."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from pytest_dlperf import models
from pytest_dlperf.worker.flops import count_training_flops


@pytest.fixture(autouse=True)
def clean_registry():
    saved = models.snapshot()
    yield
    models.restore(saved)


def _net(settings):
    return None


def _batch(batch_size, settings, device):
    return None


def _loss(model, batch):
    return None


def refused(match: str, **kwargs):
    factory = kwargs.pop("factory", _net)
    with pytest.raises(ValueError, match=match) as info:
        models.register_model("mine", **kwargs)(factory)
    assert "\n" not in str(info.value) and str(info.value).startswith("model 'mine': ")
    assert "mine" not in models.list_models()
    return str(info.value)


# --------------------------------------------------------------------------- validation


def test_an_unknown_task_lists_the_known_ones():
    message = refused("unknown task", task="detection")
    assert message == ("model 'mine': unknown task 'detection'; known tasks: bert-pretraining, "
                       "image-classification, language-modeling, regression, sequence-classification")


def test_a_unit_outside_the_units_lists_them():
    message = refused("unit must be one of", task="regression", unit="rows/s")
    assert message == "model 'mine': unit must be one of img/s, seq/s, tokens/s, samples/s, not 'rows/s'"


def test_samples_per_second_is_a_unit():
    models.register_model("mine", make_batch=_batch, loss=_loss, unit="samples/s")(_net)
    assert models.get_model_spec("mine").unit == "samples/s"
    assert "samples/s" in models.UNITS


def test_an_unknown_optimizer_lists_the_known_ones():
    message = refused("optimizer", task="regression", optimizer="lamb")
    assert message == "model 'mine': optimizer must be one of sgd, adamw, not 'lamb'"


@pytest.mark.parametrize(("role", "bad", "expected"), [
    ("make_batch", lambda batch_size, device: None,
     ("model 'mine': make_batch must take 3 positional parameters, make_batch(batch_size, settings, device); "
      "<lambda>(batch_size, device) does not")),
    ("make_batch", lambda batch_size, *, settings, device: None,
     ("model 'mine': make_batch must take 3 positional parameters, make_batch(batch_size, settings, device); "
      "<lambda>(batch_size, *, settings, device) does not")),
    ("loss", lambda batch: None,
     "model 'mine': loss must take 2 positional parameters, loss(model, batch); <lambda>(batch) does not"),
    ("loss", "cross_entropy",
     "model 'mine': loss must be a function called as loss(model, batch), not 'cross_entropy' (str)"),
    ("make_batch", 3,
     ("model 'mine': make_batch must be a function called as make_batch(batch_size, settings, device), "
      "not 3 (int)")),
    ("items_per_sample", lambda: 8,
     ("model 'mine': items_per_sample must take 1 positional parameter, items_per_sample(settings); "
      "<lambda>() does not")),
])
def test_a_function_that_cannot_take_its_arguments_says_the_signature(role, bad, expected):
    kwargs = {"make_batch": _batch, "loss": _loss, role: bad}
    assert refused("positional|called as", **kwargs) == expected


def test_a_factory_that_cannot_take_the_settings_says_the_signature():
    def build():
        return None

    message = refused("factory", task="regression", factory=build)
    assert message == ("model 'mine': factory must take 1 positional parameter, factory(settings); "
                       "build() does not")
    with pytest.raises(ValueError, match=r"^model 'mine': factory must be a function called as factory\(settings\)"):
        models.register_model("mine", task="regression", factory=42)


def test_callables_with_defaults_varargs_partials_and_classes_are_accepted():
    class Net:
        def __init__(self, settings, scale=1.0):
            self.settings = settings

    def batch(batch_size, *rest):
        return None

    models.register_model("mine", make_batch=batch, loss=functools.partial(lambda extra, m, b: None, 1),
                          items_per_sample=len)(Net)
    assert isinstance(models.create_model("mine"), Net)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("defaults", [("image_size", 32)],
     ("model 'mine': defaults must be a mapping (a dict) of setting names to values, not [('image_size', 32)] "
      "(list)")),
    ("defaults", {1: 2},
     "model 'mine': defaults must be a mapping (a dict) of setting names to values; its key 1 is not a string"),
    ("requires", "transformers",
     ("model 'mine': requires must be a mapping (a dict) of importable modules to the extras that provide them, "
      "not 'transformers' (str)")),
])
def test_defaults_and_requires_must_be_mappings(field, value, expected):
    assert refused("must be a mapping", task="regression", **{field: value}) == expected


def test_the_existing_messages_still_read_the_same():
    refused("give a task, or both make_batch and loss")
    refused(r"batch_size must be a positive integer, not 0", task="regression", batch_size=0)


def test_a_task_is_checked_as_a_model_is():
    task = models.Task(name="mine", make_batch=lambda batch_size, settings: None, loss=_loss, unit="img/s",
                       defaults={})
    with pytest.raises(ValueError, match=r"^task 'mine': make_batch must take 3 positional parameters"):
        models.register_task(task)
    assert "mine" not in models.list_tasks()


# --------------------------------------------------------------------------- tasks


def _spec(task: str, factory, **kwargs) -> models.ModelSpec:
    models.register_model("mine", task=task, **kwargs)(factory)
    return models.get_model_spec("mine")


class _CausalLM(nn.Module):
    def __init__(self, settings):
        super().__init__()
        self.embed = nn.Embedding(settings["vocab_size"], 16)
        self.head = nn.Linear(16, settings["vocab_size"])

    def forward(self, input_ids):
        return self.head(self.embed(input_ids))


class _Classifier(_CausalLM):
    def __init__(self, settings):
        super().__init__({"vocab_size": settings["vocab_size"]})
        self.head = nn.Linear(16, settings["num_labels"])

    def forward(self, input_ids):
        return self.head(self.embed(input_ids).mean(dim=1))


def test_the_tasks_and_their_defaults():
    assert models.list_tasks() == ["bert-pretraining", "image-classification", "language-modeling", "regression",
                                   "sequence-classification"]
    table = {name: (t.unit, t.optimizer, dict(t.defaults)) for name in models.list_tasks()
             if name != "bert-pretraining" for t in [models.get_task(name)]}
    assert table == {
        "image-classification": ("img/s", "sgd", {"image_size": 224, "num_classes": 1000}),
        "language-modeling": ("tokens/s", "adamw", {"seq_len": 1024, "vocab_size": 50257}),
        "sequence-classification": ("seq/s", "adamw", {"seq_len": 128, "vocab_size": 30522, "num_labels": 2}),
        "regression": ("samples/s", "adamw", {"in_features": 64, "out_features": 1}),
    }
    with pytest.raises(ValueError, match="unknown task 'nope'; known tasks: bert-pretraining, image-classification"):
        models.get_task("nope")


def test_language_modeling_predicts_the_next_token_and_counts_every_token():
    spec = _spec("language-modeling", _CausalLM, defaults={"seq_len": 12, "vocab_size": 50})
    settings = spec.settings()
    batch = spec.make_batch(3, settings, "cpu")
    ids, targets = batch["input_ids"], batch["targets"]
    assert ids.shape == targets.shape == (3, 12) and ids.dtype == torch.int64
    assert ids.min() >= 0 and ids.max() < 50
    assert torch.equal(targets[:, :-1], ids[:, 1:]) and targets[:, -1].eq(-100).all()
    loss = spec.loss(_CausalLM(settings), batch)
    assert loss.shape == () and loss.item() == pytest.approx(math.log(50), abs=0.7)
    assert (spec.unit, spec.optimizer) == ("tokens/s", "adamw")
    assert spec.samples_per_batch(3, settings) == 36
    assert count_training_flops(spec, settings).per_sample == 3 * 2 * 16 * 50  # the head, per token


def test_a_model_that_reports_sequences_does_not_count_tokens():
    spec = _spec("language-modeling", _CausalLM, unit="seq/s", defaults={"seq_len": 12, "vocab_size": 50})
    assert spec.items_per_sample is None and spec.samples_per_batch(3, spec.settings()) == 3


def test_sequence_classification_is_one_label_per_sequence():
    spec = _spec("sequence-classification", _Classifier, defaults={"seq_len": 10, "vocab_size": 40, "num_labels": 5})
    batch = spec.make_batch(4, spec.settings(), "cpu")
    assert batch["input_ids"].shape == (4, 10) and batch["labels"].shape == (4,)
    assert batch["labels"].max() < 5
    assert spec.loss(_Classifier(spec.settings()), batch).item() == pytest.approx(math.log(5), abs=0.7)
    assert (spec.unit, spec.optimizer, spec.samples_per_batch(4, spec.settings())) == ("seq/s", "adamw", 4)


def test_regression_is_float_features_and_targets_and_a_mean_squared_error():
    spec = _spec("regression", lambda s: nn.Linear(s["in_features"], s["out_features"]),
                 defaults={"in_features": 6, "out_features": 2})
    features, targets = spec.make_batch(5, spec.settings(), "cpu")
    assert features.shape == (5, 6) and targets.shape == (5, 2) and features.dtype == targets.dtype == torch.float32
    model = spec.factory(spec.settings())
    assert spec.loss(model, (features, targets)).item() == pytest.approx(
        nn.functional.mse_loss(model(features), targets).item())
    assert (spec.unit, spec.optimizer, spec.samples_per_batch(5, spec.settings())) == ("samples/s", "adamw", 5)


def test_an_output_of_the_wrong_shape_says_the_shape_expected():
    lm = _spec("language-modeling", _CausalLM, defaults={"seq_len": 4, "vocab_size": 9})
    with pytest.raises(ValueError, match=r"^language-modeling: the model returned logits of shape \[2, 9\]; "
                                         r"expected logits of shape \[batch, seq_len, vocab_size\] = \[2, 4, vocab_size\]$"):
        lm.loss(lambda ids: torch.zeros(2, 9), lm.make_batch(2, lm.settings(), "cpu"))
    classify = models.get_task("sequence-classification")
    with pytest.raises(ValueError, match=r"^sequence-classification: the model returned a tuple; expected logits of "
                                         r"shape \[batch, num_labels\] = \[2, num_labels\]$"):
        classify.loss(lambda ids: (ids,), classify.make_batch(2, classify.defaults, "cpu"))
    regression = models.get_task("regression")
    with pytest.raises(ValueError, match=r"^regression: the model returned an output of shape \[3\]; expected an "
                                         r"output of shape \[batch, out_features\] = \[3, 1\]$"):
        regression.loss(lambda x: x.sum(dim=1), regression.make_batch(3, regression.defaults, "cpu"))


def test_an_output_with_logits_is_read_as_transformers_returns_it():
    class Output:
        def __init__(self, logits):
            self.logits = logits

    task = models.get_task("sequence-classification")
    batch = task.make_batch(2, task.defaults, "cpu")
    assert task.loss(lambda ids: Output(torch.zeros(2, 2)), batch).item() == pytest.approx(math.log(2))


@pytest.mark.parametrize(("task", "setting", "value", "message"), [
    ("language-modeling", "seq_len", 1, "setting seq_len=1: a sequence needs 2 tokens at least"),
    ("sequence-classification", "num_labels", 0, "setting num_labels=0: expected a positive integer"),
    ("regression", "in_features", "8", "setting in_features='8': expected a positive integer"),
])
def test_bad_settings_are_clear_errors(task, setting, value, message):
    spec = models.get_task(task)
    with pytest.raises(ValueError, match=message):
        spec.make_batch(2, {**spec.defaults, setting: value}, "cpu")


# --------------------------------------------------------------------------- the examples

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# Each example folder: the models its conftest.py registers and the unit each reports.
EXAMPLE_UNITS = {
    "custom_vision": {"my-convnet": "img/s"},
    "custom_lm": {"my-lm": "tokens/s", "my-classifier": "seq/s"},
    "custom_regression": {"my-mlp": "samples/s"},
    "custom_task": {"my-recommender": "samples/s"},
}
COMMAND = re.compile(r"pytest -p no:cacheprovider -m dlperf --dlperf-model (\S+) --dlperf-device cpu --dlperf-steps 5")


def test_every_example_is_tested_and_its_command_is_in_its_docstring_and_the_docs():
    assert sorted(p.name for p in EXAMPLES.iterdir() if (p / "conftest.py").exists()) == sorted(EXAMPLE_UNITS)
    documented = COMMAND.findall((EXAMPLES.parent / "docs" / "models.md").read_text())
    for folder, units in EXAMPLE_UNITS.items():
        named = COMMAND.findall((EXAMPLES / folder / "conftest.py").read_text())
        assert named == [",".join(units)], folder
        assert ",".join(units) in documented, folder


@pytest.mark.parametrize("folder", list(EXAMPLE_UNITS))
def test_the_example_trains_through_the_plugin(dlperf, folder):
    units = EXAMPLE_UNITS[folder]
    dlperf.pytester.makeconftest((EXAMPLES / folder / "conftest.py").read_text())
    result = dlperf.run("-m", "dlperf", "--dlperf-model", ",".join(units), "--dlperf-json", "results.json")
    result.assert_outcomes(passed=len(units))
    records = dlperf.results()["cases"]
    assert {record["case"]["model"]: record["unit"] for record in records} == units
    for record in records:
        assert record["verdict"] == "no-baseline" and record["throughput"] > 0
        assert record["flops"]["flops_per_sample"] > 0  # counted: the batch and loss work on the meta device too
