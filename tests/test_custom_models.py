"""A model of one's own (docs/models.md): what register_model refuses, and why, in one line."""

from __future__ import annotations

import functools

import pytest

from pytest_dlperf import models


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
    assert message == "model 'mine': unknown task 'detection'; known tasks: image-classification"


def test_a_unit_outside_the_units_lists_them():
    message = refused("unit must be one of", task="image-classification", unit="rows/s")
    assert message == "model 'mine': unit must be one of img/s, seq/s, tokens/s, samples/s, not 'rows/s'"


def test_samples_per_second_is_a_unit():
    models.register_model("mine", make_batch=_batch, loss=_loss, unit="samples/s")(_net)
    assert models.get_model_spec("mine").unit == "samples/s"
    assert "samples/s" in models.UNITS


def test_an_unknown_optimizer_lists_the_known_ones():
    message = refused("optimizer", task="image-classification", optimizer="lamb")
    assert message == "model 'mine': optimizer must be one of sgd, adamw, not 'lamb'"


@pytest.mark.parametrize(("role", "bad", "expected"), [
    ("make_batch", lambda batch_size, device: None,
     "model 'mine': make_batch must take 3 positional parameters, make_batch(batch_size, settings, device); "
     "<lambda>(batch_size, device) does not"),
    ("make_batch", lambda batch_size, *, settings, device: None,
     "model 'mine': make_batch must take 3 positional parameters, make_batch(batch_size, settings, device); "
     "<lambda>(batch_size, *, settings, device) does not"),
    ("loss", lambda batch: None,
     "model 'mine': loss must take 2 positional parameters, loss(model, batch); <lambda>(batch) does not"),
    ("loss", "cross_entropy",
     "model 'mine': loss must be a function called as loss(model, batch), not 'cross_entropy' (str)"),
    ("make_batch", 3,
     "model 'mine': make_batch must be a function called as make_batch(batch_size, settings, device), "
     "not 3 (int)"),
    ("items_per_sample", lambda: 8,
     "model 'mine': items_per_sample must take 1 positional parameter, items_per_sample(settings); "
     "<lambda>() does not"),
])
def test_a_function_that_cannot_take_its_arguments_says_the_signature(role, bad, expected):
    kwargs = {"make_batch": _batch, "loss": _loss, role: bad}
    assert refused("positional|called as", **kwargs) == expected


def test_a_factory_that_cannot_take_the_settings_says_the_signature():
    def build():
        return None

    message = refused("factory", task="image-classification", factory=build)
    assert message == ("model 'mine': factory must take 1 positional parameter, factory(settings); "
                       "build() does not")
    with pytest.raises(ValueError, match=r"^model 'mine': factory must be a function called as factory\(settings\)"):
        models.register_model("mine", task="image-classification", factory=42)


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
     "model 'mine': defaults must be a mapping (a dict) of setting names to values, not [('image_size', 32)] "
     "(list)"),
    ("defaults", {1: 2},
     "model 'mine': defaults must be a mapping (a dict) of setting names to values; its key 1 is not a string"),
    ("requires", "transformers",
     "model 'mine': requires must be a mapping (a dict) of importable modules to the extras that provide them, "
     "not 'transformers' (str)"),
])
def test_defaults_and_requires_must_be_mappings(field, value, expected):
    assert refused("must be a mapping", task="image-classification", **{field: value}) == expected


def test_the_existing_messages_still_read_the_same():
    refused("give a task, or both make_batch and loss")
    refused(r"batch_size must be a positive integer, not 0", task="image-classification", batch_size=0)


def test_a_task_is_checked_as_a_model_is():
    task = models.Task(name="mine", make_batch=lambda batch_size, settings: None, loss=_loss, unit="img/s",
                       defaults={})
    with pytest.raises(ValueError, match=r"^task 'mine': make_batch must take 3 positional parameters"):
        models.register_task(task)
    assert "mine" not in models.list_tasks()
