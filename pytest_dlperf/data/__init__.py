"""Data backends of image-classification cases: ``synthetic``, ``torchvision`` and ``dali``.

* :mod:`.checks`: the controller side, standard library only: the ``data`` setting, the
  ImageFolder layout checked before any case runs, the loader figures pooled over runs
  and their wording in messages.
* :mod:`.sources`: the worker side: the torchvision and DALI sources a training step
  fetches from, the data-only step and the loader's window meter.
* :mod:`.dataset`: ``dlperf dataset``, a small JPEG ImageFolder for smoke runs.
"""

from __future__ import annotations

from .checks import (DALI, IMAGE_EXTENSIONS, IMAGE_TASK, LAYOUT, MB, SYNTHETIC, TORCHVISION, DataError, backend_of,
                     check_case, data_only_message, describe, missing_module, pool, scan_image_folder)
from .dataset import write_image_folder
from .sources import (MAX_DEFAULT_WORKERS, MEAN, STD, DaliSource, DataOnlyStep, ImageFiles, TorchvisionSource,
                      WindowMeter, default_workers, figures, local_world_size, make_source)

__all__ = ["DALI", "IMAGE_EXTENSIONS", "IMAGE_TASK", "LAYOUT", "MB", "SYNTHETIC", "TORCHVISION", "DataError",
           "backend_of", "check_case", "data_only_message", "describe", "missing_module", "pool",
           "scan_image_folder", "write_image_folder", "MAX_DEFAULT_WORKERS", "MEAN", "STD", "DaliSource",
           "DataOnlyStep", "ImageFiles", "TorchvisionSource", "WindowMeter", "default_workers", "figures",
           "local_world_size", "make_source"]
