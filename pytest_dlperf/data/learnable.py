"""``dlperf dataset --learnable``: an ImageFolder whose classes a small model learns in seconds.

Convergence cases (:mod:`pytest_dlperf.convergence`) train to a target accuracy; without
ImageNet they need a data set that is learnable, not noise.  Each class has its own look:

* a colour (hues evenly spaced around the colour wheel, jittered per image),
* a shape (disc, square, triangle, cross, ring, diamond),
* a texture inside the shape (solid, stripes, checks, dots),

drawn at a random position and size on a noisy grey background, with pixel noise over
the whole image, so that no two images are alike and the set is not memorised trivially.
The layout is the ImageFolder one with a train and a validation split::

    DIR/train/<class>/<i>.png
    DIR/val/<class>/<i>.png

It is written into a temporary folder next to ``DIR`` and renamed into place when
complete, so an interrupted run leaves no half-written set.  Needs numpy and Pillow
(torchvision's dependencies).
"""

from __future__ import annotations

import colorsys
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

SHAPES = ("disc", "square", "triangle", "cross", "ring", "diamond")
TEXTURES = ("solid", "stripes", "checks", "dots")
SPLITS = ("train", "val")


class DatasetError(ValueError):
    """A target folder or a count that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True)
class ClassLook:
    """What makes one class: its hue (0..1), shape and texture."""

    name: str
    hue: float
    shape: str
    texture: str


def class_looks(classes: int) -> list[ClassLook]:
    """The looks of ``classes`` classes: distinct hues; shapes and textures cycle."""
    looks = []
    for c in range(classes):
        shape = SHAPES[c % len(SHAPES)]
        texture = TEXTURES[(c // len(SHAPES) + c) % len(TEXTURES)]
        looks.append(ClassLook(f"{c:02d}-{shape}-{texture}", c / classes, shape, texture))
    return looks


def _mask(shape: str, size: int, cx: float, cy: float, r: float, yy, xx):
    import numpy as np

    dx, dy = xx - cx, yy - cy
    if shape == "disc":
        return dx * dx + dy * dy <= r * r
    if shape == "square":
        return (np.abs(dx) <= r * 0.85) & (np.abs(dy) <= r * 0.85)
    if shape == "triangle":
        return (dy <= r * 0.8) & (dy >= -r) & (np.abs(dx) <= (dy + r) * 0.6)
    if shape == "cross":
        return ((np.abs(dx) <= r * 0.3) & (np.abs(dy) <= r)) | ((np.abs(dy) <= r * 0.3) & (np.abs(dx) <= r))
    if shape == "ring":
        d2 = dx * dx + dy * dy
        return (d2 <= r * r) & (d2 >= (0.55 * r) ** 2)
    if shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= r
    raise ValueError(f"unknown shape {shape!r}")


def _texture(texture: str, yy, xx, period: int):
    import numpy as np

    if texture == "solid":
        return np.ones_like(xx, dtype=float)
    if texture == "stripes":
        return 0.55 + 0.45 * ((xx // period) % 2)
    if texture == "checks":
        return 0.55 + 0.45 * (((xx // period) + (yy // period)) % 2)
    if texture == "dots":
        return 0.55 + 0.45 * (((xx % (2 * period)) < period) & ((yy % (2 * period)) < period))
    raise ValueError(f"unknown texture {texture!r}")


def draw(look: ClassLook, size: int, rng) -> bytes:
    """One image of class ``look``: ``size`` x ``size`` RGB bytes (row-major, 3 bytes a pixel)."""
    import numpy as np

    yy, xx = np.mgrid[0:size, 0:size].astype(float)
    image = np.empty((size, size, 3))
    image[:] = rng.uniform(0.25, 0.6)  # a grey background of random brightness
    r = rng.uniform(0.22, 0.42) * size
    cx, cy = rng.uniform(r, size - r), rng.uniform(r, size - r)
    hue = (look.hue + rng.uniform(-0.025, 0.025)) % 1.0
    colour = np.array(colorsys.hsv_to_rgb(hue, rng.uniform(0.7, 1.0), rng.uniform(0.75, 1.0)))
    mask = _mask(look.shape, size, cx, cy, r, yy, xx)
    shade = _texture(look.texture, yy, xx, max(2, size // 10))
    image[mask] = colour * shade[mask][:, None]
    image += rng.normal(0.0, 0.06, image.shape)
    return (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8).tobytes()


def _write_split(folder: Path, looks: list[ClassLook], per_class: int, size: int, rng) -> int:
    from PIL import Image

    for look in looks:
        target = folder / look.name
        target.mkdir(parents=True)
        for i in range(per_class):
            Image.frombytes("RGB", (size, size), draw(look, size, rng)).save(target / f"{i}.png")
    return len(looks) * per_class


def write_learnable(root: str | os.PathLike, classes: int = 4, train_per_class: int = 200,
                    val_per_class: int = 50, size: int = 40, seed: int = 0, force: bool = False) -> dict[str, int]:
    """Write the learnable set at ``root``; returns the images per split.

    ``root`` must be new or empty unless ``force`` (its old content is then replaced, once
    the new set is complete).  Raises :class:`DatasetError` for a bad count or target.
    """
    import numpy as np

    for name, value, least in (("--classes", classes, 2), ("--per-class", train_per_class, 1),
                               ("--val-per-class", val_per_class, 1), ("--size", size, 16)):
        if value < least:
            raise DatasetError(f"{name}: {value} is not allowed; expected an integer >= {least}")
    target = Path(root)
    if target.exists() and not target.is_dir():
        raise DatasetError(f"{target}: not a folder; give a new or empty folder")
    if target.exists() and any(target.iterdir()) and not force:
        raise DatasetError(f"{target}: not empty; give a new or empty folder (--force replaces it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        rng = np.random.default_rng(seed)
        looks = class_looks(classes)
        counts = {"train": _write_split(staging / "train", looks, train_per_class, size, rng),
                  "val": _write_split(staging / "val", looks, val_per_class, size, rng)}
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    from .checks import scan_image_folder

    scan_image_folder.cache_clear()
    return counts
