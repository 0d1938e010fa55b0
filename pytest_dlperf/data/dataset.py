"""``dlperf dataset``: a small JPEG ImageFolder for smoke runs and tests."""

from __future__ import annotations

import os

from .checks import scan_image_folder


def write_image_folder(root: str | os.PathLike, classes: int = 4, per_class: int = 40,
                       sizes: tuple[int, int] = (40, 96), seed: int = 7) -> int:
    """Write a small JPEG data set in the ImageFolder layout; returns the number of images.

    ``root/class{c}/{i}.jpg``: noisy RGB images whose sides are drawn from ``sizes``, saved
    at quality 60 or 90, so the files differ in size as real ones do.  For smoke runs of
    the torchvision and DALI backends without ImageNet (``dlperf dataset DIR``) and for the
    tests.  Needs Pillow (torchvision's dependency).
    """
    import random

    from PIL import Image

    rng = random.Random(seed)
    for c in range(classes):
        folder = os.path.join(root, f"class{c}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            w, h = rng.randint(*sizes), rng.randint(*sizes)
            pixels = bytes(rng.randrange(256) for _ in range(w * h * 3))
            Image.frombytes("RGB", (w, h), pixels).save(os.path.join(folder, f"{i}.jpg"),
                                                        quality=rng.choice((60, 90)))
    scan_image_folder.cache_clear()
    return classes * per_class
