import textwrap

import pytest

from pytest_dlperf import models


@pytest.fixture(autouse=True)
def clean_registry():
    saved = models.snapshot()
    yield
    models.restore(saved)


def test_builtins():
    assert {"resnet50", "resnet18", "vgg16", "tiny"} <= set(models.list_models())
    spec = models.get_model_spec("resnet50")
    assert (spec.unit, spec.batch_size, spec.optimizer, spec.channels_last) == ("img/s", 256, "sgd", True)
    assert spec.settings() == {"image_size": 224, "num_classes": 1000}
    assert spec.settings({"image_size": 160})["image_size"] == 160


def test_resnet50_is_torchvisions_v1_5():
    model = models.create_model("resnet50", {"num_classes": 10})
    # v1.5: the stride-2 downsampling sits in the 3x3 convolution of the bottleneck.
    block = model.layer2[0]
    assert block.conv1.stride == (1, 1) and block.conv2.stride == (2, 2)
    assert model.fc.out_features == 10


def test_unknown_model_lists_the_registered_ones():
    with pytest.raises(models.UnknownModelError, match=r"unknown model 'resnet51'; registered models: .*resnet50"):
        models.get_model_spec("resnet51")


def test_register_with_a_task_and_overrides():
    @models.register_model("mine", task="image-classification", batch_size=8, defaults={"image_size": 16})
    def mine(settings):
        """My model."""
        from torch import nn

        return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, settings["num_classes"]))

    spec = models.get_model_spec("mine")
    assert spec.settings() == {"image_size": 16, "num_classes": 1000}
    assert spec.description == "My model."
    assert spec.source == __file__
    assert models.create_model("mine")[1].out_features == 1000


def test_register_validates():
    with pytest.raises(ValueError, match="unknown task 'detection'"):
        models.register_model("x", task="detection")(lambda s: None)
    with pytest.raises(ValueError, match="give a task, or both make_batch and loss"):
        models.register_model("x")(lambda s: None)
    with pytest.raises(ValueError, match="unit must be one of"):
        models.register_model("x", task="image-classification", unit="img/min")(lambda s: None)


def test_the_same_name_from_another_file_is_refused(tmp_path):
    other = tmp_path / "other_models.py"
    other.write_text(textwrap.dedent("""
        from pytest_dlperf import register_model

        @register_model("tiny", task="image-classification")
        def tiny(settings):
            return None
    """))
    with pytest.raises(ValueError, match=r"model 'tiny' is already registered by .*models.py"):
        models.ensure_registered("not-there", str(other), "other_models")


def test_ensure_registered_imports_the_registering_file(tmp_path):
    (tmp_path / "helper_net.py").write_text("WIDTH = 7\n")
    conftest = tmp_path / "conftest.py"
    conftest.write_text(textwrap.dedent("""
        from helper_net import WIDTH  # a sibling module, importable as under pytest
        from pytest_dlperf import register_model

        @register_model("from-file", task="image-classification", batch_size=WIDTH)
        def from_file(settings):
            return None
    """))
    spec = models.ensure_registered("from-file", str(conftest), "conftest")
    assert spec.batch_size == 7 and spec.source == str(conftest)


def test_missing_requirements_become_skip_reasons():
    @models.register_model("needs-lib", task="image-classification",
                           requires={"no_such_module_dlperf": "fancy", "torch": "torch"})
    def needs(settings):
        return None

    assert models.get_model_spec("needs-lib").missing_requirements() == [
        "needs the fancy extra (module 'no_such_module_dlperf' is not installed)"]


def test_the_built_ins_name_their_tasks():
    names = ("tiny", "resnet50", "gpt2", "bert-base", "bert-tiny")
    assert {name: models.get_model_spec(name).task for name in names} == {
        "tiny": "image-classification", "resnet50": "image-classification", "gpt2": "language-modeling",
        "bert-base": "bert-pretraining", "bert-tiny": "bert-pretraining"}
    gpt2 = models.get_model_spec("gpt2")
    # The task's next-token loss and count of tokens; GPT-2's own batch, which checks its config's settings.
    assert gpt2.loss is models.get_task("language-modeling").loss
    assert gpt2.items_per_sample is models.get_task("language-modeling").items_per_sample
    assert gpt2.make_batch is not models.get_task("language-modeling").make_batch


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_each_built_in_batch_s_bytes_are_counted_as_the_meta_device_makes_them(batch_size):
    # Collection checks a case's batch fits the machine by these counts (no torch in the controller): each must be
    # what the make_batch makes.  Every built-in model, and each task's batch through a model of its own.
    import torch

    from pytest_dlperf.controller.collection import input_bytes
    from pytest_dlperf.models.registry import BATCH_BYTES

    for task in ("sequence-classification", "regression", "language-modeling"):
        models.register_model(f"bytes-{task}", task=task)(lambda settings: torch.nn.Identity())
    checked = set()
    for name in models.list_models():
        spec = models.get_model_spec(name)
        settings = spec.settings()
        batch = spec.make_batch(batch_size, settings, torch.device("meta"))
        tensors = batch.values() if isinstance(batch, dict) else batch
        made = sum(t.numel() * t.element_size() for t in tensors)
        assert models.batch_bytes(spec.make_batch, batch_size, settings) == made, name
        assert input_bytes(spec, settings, batch_size) == made, name
        checked.add(spec.make_batch)
    assert set(BATCH_BYTES) <= checked  # no count left untested


def test_a_batch_without_a_count_is_made_on_the_meta_device():
    import torch

    from pytest_dlperf.controller.collection import input_bytes

    def make(batch_size, settings, device):
        return torch.zeros(batch_size, 7, device=device), torch.zeros(batch_size, dtype=torch.int64, device=device)

    models.register_model("uncounted", make_batch=make, loss=lambda model, batch: 0)(lambda s: torch.nn.Identity())
    assert input_bytes(models.get_model_spec("uncounted"), {}, 5) == 5 * 7 * 4 + 5 * 8
