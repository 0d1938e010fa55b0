"""The controller side of the data backends, standard library only.

The ``data`` setting of a case (:func:`backend_of`), the checks made before any case runs
(:func:`check_case`: an image-classification model, a folder in the ImageFolder layout, the
backend's module installed), and the loader's figures pooled over runs and worded for the
messages (:func:`pool`, :func:`describe`, :func:`data_only_message`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any


SYNTHETIC, TORCHVISION, DALI = "synthetic", "torchvision", "dali"


IMAGE_TASK = "image-classification"


LAYOUT = "an ImageFolder layout: one subfolder per class with the images in it (DIR/CLASS/IMAGE.jpg)"


# torchvision's ImageFolder extensions; DALI's file reader takes these too.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


MB = 1e6  # MB/s are decimal megabytes, as disk and network figures are


class DataError(ValueError):
    """A data setting, option or folder that cannot be used; the message names it."""


def backend_of(settings: Mapping[str, Any]) -> str:
    return str(settings.get("data", SYNTHETIC))


@functools.lru_cache(maxsize=16)
def scan_image_folder(path: str) -> tuple[str, ...]:
    """The class names of the ImageFolder at ``path``; :class:`DataError` when it is not one.

    Cheap enough for ImageNet at collection: it lists the class folders and stops at the
    first image of each (an empty class makes torchvision's ImageFolder fail later).
    """
    if not os.path.exists(path):
        raise DataError(f"--dlperf-data-dir: {path} does not exist; expected {LAYOUT}")
    if not os.path.isdir(path):
        raise DataError(f"--dlperf-data-dir: {path} is not a folder; expected {LAYOUT}")
    classes = sorted(entry.name for entry in os.scandir(path) if entry.is_dir())
    if not classes:
        raise DataError(f"--dlperf-data-dir: {path} has no class subfolders; expected {LAYOUT}")
    for name in classes:
        if not _has_image(os.path.join(path, name)):
            raise DataError(f"--dlperf-data-dir: {path}: class folder {name!r} has no image "
                            f"({', '.join(IMAGE_EXTENSIONS)}); expected {LAYOUT}")
    return tuple(classes)


def _has_image(folder: str) -> bool:
    for root, _dirs, files in os.walk(folder, followlinks=True):
        if any(f.lower().endswith(IMAGE_EXTENSIONS) for f in files):
            return True
    return False


def check_case(case_id: str, backend: str, model_spec, settings: Mapping[str, Any],
               data_dir: str | None, where: str) -> None:
    """Raise :class:`DataError` when ``case_id`` cannot read real data with ``backend``.

    Data backends apply to image-classification models; torchvision and dali need a
    data dir in the ImageFolder layout with no more classes than the model's
    ``num_classes``.  ``where`` names the setting (a baseline entry or ``--dlperf-set``).
    """
    if backend == SYNTHETIC:
        return
    if model_spec.task != IMAGE_TASK:
        task = f"task {model_spec.task!r}" if model_spec.task else "no task"
        raise DataError(f"{where}: case {case_id}: data={backend} applies to {IMAGE_TASK} models; "
                        f"model {model_spec.name!r} has {task}")
    if not data_dir:
        raise DataError(f"{where}: case {case_id}: data={backend} reads images from --dlperf-data-dir "
                        f"(ini: dlperf_data_dir), which is not set; expected a folder in {LAYOUT}")
    classes = scan_image_folder(data_dir)
    wanted = settings.get("num_classes")
    if isinstance(wanted, int) and len(classes) > wanted:
        raise DataError(f"{where}: case {case_id}: {data_dir} has {len(classes)} classes but the model's "
                        f"num_classes is {wanted}; set num_classes={len(classes)} (--dlperf-set or the "
                        f"entry's settings)")


def missing_module(backend: str) -> str | None:
    """A skip reason when ``backend``'s library is not installed here."""
    from ..models import module_available

    if backend == DALI and not module_available("nvidia.dali"):
        return "needs the dali extra (module 'nvidia.dali' is not installed)"
    return None


def pool(runs_data: Sequence[Mapping[str, Any] | None], median: float) -> dict[str, Any] | None:
    """The ``data`` figures of several runs: bytes and seconds added up, samples/s at ``median``."""
    found = [d for d in runs_data if d]
    if not found:
        return None
    total = sum(d["bytes"] for d in found)
    samples = sum(d["samples"] for d in found)
    seconds = sum(d["seconds"] for d in found)
    return {**found[0], "samples_per_second": median, "megabytes_per_second": total / seconds / MB,
            "bytes_per_sample": total / samples if samples else 0.0, "bytes": total, "samples": samples,
            "seconds": seconds}


def describe(data: Mapping[str, Any], unit: str = "img/s") -> str:
    """One phrase: ``torchvision loader (2 workers per rank): 812.0 img/s, 9.1 MB/s of image files ...``."""
    what = "thread" if data["backend"] == DALI else "worker"
    plural = "" if data["workers"] == 1 else "s"
    decoded = f", {data['decoder']} decoding" if data["backend"] == DALI else ""
    return (f"{data['backend']} loader ({data['workers']} {what}{plural} per rank{decoded}): "
            f"{data['samples_per_second']:.1f} {unit}, {data['megabytes_per_second']:.1f} MB/s of image files "
            f"({data['bytes_per_sample'] / 1e3:.1f} kB per image)")


def data_only_message(case_id: str, data: Mapping[str, Any], unit: str, baseline: float | None) -> str:
    """The message of a ``--dlperf-data-only`` case; with the baseline's training figure, whether it is input-bound."""
    text = (f"{case_id}: data-only: {describe(data, unit)}; the loader alone, not judged against a "
            f"training-throughput baseline")
    if baseline is not None:
        if data["samples_per_second"] < baseline:
            text += (f"; slower than the baseline's training throughput {baseline:.1f} {unit}: "
                     f"this case is input-bound")
        else:
            text += f"; keeps up with the baseline's training throughput {baseline:.1f} {unit}"
    return text
