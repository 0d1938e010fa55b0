"""A convnet of one's own, benchmarked with the image-classification task.

Run from this folder (a few seconds on a CPU):

    pytest -p no:cacheprovider -m dlperf --dlperf-model my-convnet --dlperf-device cpu --dlperf-steps 5

The task supplies the batch, ``(images float32 [B, 3, image_size, image_size], labels int64
[B])``, the loss (cross entropy of ``model(images)`` against the labels), the unit (img/s),
the optimizer (SGD) and channels_last under amp and bf16.  The factory gets the case's
settings: the task's defaults, this model's ``defaults`` on top, then ``--dlperf-set``.
"""

from torch import nn

from pytest_dlperf import register_model


class SmallConvNet(nn.Module):
    def __init__(self, width: int, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.classifier = nn.Linear(2 * width, num_classes)

    def forward(self, images):
        return self.classifier(self.features(images))


@register_model("my-convnet", task="image-classification", batch_size=16,
                defaults={"image_size": 32, "num_classes": 10, "width": 16})
def my_convnet(settings):
    """Two convolutions and a linear classifier on 32x32 images."""
    return SmallConvNet(settings["width"], settings["num_classes"])
