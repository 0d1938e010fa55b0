"""Image-classification models: the task (synthetic images, cross-entropy, SGD) and the CNNs.

ResNet-50 v1.5, ResNet-18 and VGG16 come from torchvision, built without weights; ``tiny``
is a two-layer convnet that trains in milliseconds on a CPU (the plugin's own tests and
the CPU suite use it).  Importing this module registers them (:mod:`.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .registry import Task, register_batch_bytes, register_model, register_task


# --------------------------------------------------------------------------- tasks


def _image_batch(batch_size: int, settings: Mapping[str, Any], device):
    import torch

    size = int(settings["image_size"])
    classes = int(settings["num_classes"])
    images = torch.randn(batch_size, 3, size, size, device=device)
    labels = torch.randint(0, classes, (batch_size,), device=device)
    return images, labels


@register_batch_bytes(_image_batch)
def _image_batch_bytes(batch_size: int, settings: Mapping[str, Any]) -> int:
    size = int(settings["image_size"])
    return batch_size * (3 * size * size * 4 + 8)  # float32 images, int64 labels


def _classification_loss(model, batch):
    import torch.nn.functional as F

    images, labels = batch
    return F.cross_entropy(model(images), labels)


register_task(
    Task(
        name="image-classification",
        make_batch=_image_batch,
        loss=_classification_loss,
        unit="img/s",
        defaults={"image_size": 224, "num_classes": 1000},
        channels_last=True,
        optimizer="sgd",
    )
)


# --------------------------------------------------------------------------- built-ins


def _torchvision(name: str, settings: Mapping[str, Any]):
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=int(settings["num_classes"]))


@register_model("resnet50", task="image-classification", batch_size=256)
def resnet50(settings):
    """ResNet-50 v1.5 (torchvision's: stride 2 in the 3x3 convolution), as NVIDIA trains it."""
    return _torchvision("resnet50", settings)


@register_model("resnet18", task="image-classification", batch_size=256)
def resnet18(settings):
    """ResNet-18 from torchvision."""
    return _torchvision("resnet18", settings)


@register_model("vgg16", task="image-classification", batch_size=128)
def vgg16(settings):
    """VGG16 from torchvision (no batch norm), as in the PaddlePaddle VGG16 report."""
    return _torchvision("vgg16", settings)


@register_model(
    "tiny",
    task="image-classification",
    batch_size=32,
    defaults={"image_size": 32, "num_classes": 10},
)
def tiny(settings):
    """A two-layer convnet on 32x32 images that trains in milliseconds on a CPU (for tests)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, int(settings["num_classes"])),
    )


