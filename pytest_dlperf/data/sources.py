"""Data backends of image-classification cases: ``synthetic``, ``torchvision`` and ``dali``.

A case's ``data`` setting picks where its batches come from:

* ``synthetic`` (the default): one batch made on the device once and reused every step,
  as NVIDIA's ``--data-backend synthetic``.  It measures the model alone.
* ``torchvision``: ``ImageFolder`` + ``DataLoader`` worker processes, pinned memory on CUDA,
  prefetching, a ``DistributedSampler`` under several ranks.  Transforms as NVIDIA's
  training pipeline: ``RandomResizedCrop(image_size)``, ``RandomHorizontalFlip``,
  ``ToTensor``, ``Normalize``.
* ``dali``: the same folder read with DALI's file reader, sharded per rank, decoded on the
  GPU (``mixed``) or, without a GPU, in a CPU-only pipeline; random resized crop, then
  crop-mirror-normalize to CHW float.

A real backend's batches are fetched (and copied to the device, ``non_blocking``) inside
the measured windows: that is how an input-bound case shows.  Every source counts the
bytes of the image *files* it delivered, so the worker reports the MB/s read alongside
the samples/s; ``--dlperf-data-only`` times the loader without a model at all.

This module is the worker side; :mod:`.checks` is the controller's. The sources import
torch, torchvision and DALI when they are built.
"""

from __future__ import annotations

import io
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .checks import DALI, MB, TORCHVISION, DataError, scan_image_folder


MEAN = (0.485, 0.456, 0.406)


STD = (0.229, 0.224, 0.225)


MAX_DEFAULT_WORKERS = 8


def local_world_size(env: Mapping[str, str] | None = None, world_size: int = 1) -> int:
    """How many ranks share this node: torchrun's, SLURM's or OpenMPI's variable, else ``world_size``."""
    env = os.environ if env is None else env
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        value = env.get(name, "").split("(")[0]  # SLURM may write "8(x2)"
        if value.isdigit() and int(value) > 0:
            return int(value)
    return max(1, world_size)


def default_workers(local_ranks: int, cpus: int | None = None) -> int:
    """Loader workers (or DALI threads) per rank: the rank's share of the CPUs, less one for
    the training process itself, at least 1 and at most :data:`MAX_DEFAULT_WORKERS`."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = cpus // max(1, local_ranks)
    return max(1, min(MAX_DEFAULT_WORKERS, share - 1))


class ImageFiles:
    """A map-style dataset of ``(path, label)`` samples that also returns each file's size.

    It reads the file's bytes itself (rather than letting PIL open the path) so the size
    it reports is exactly what was read.  A plain class, so that ``DataLoader`` workers
    can pickle it under any start method.
    """

    def __init__(self, samples: Sequence[tuple[str, int]], transform):
        self.samples = list(samples)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        from PIL import Image

        path, label = self.samples[index]
        with open(path, "rb") as f:
            raw = f.read()
        image = Image.open(io.BytesIO(raw)).convert("RGB")
        return self.transform(image), label, len(raw)


def _too_small(data_dir: str, images: int, batch_size: int, world_size: int) -> DataError:
    return DataError(f"--dlperf-data-dir: {data_dir} has {images} images; one step of this case takes "
                     f"batch {batch_size} x {world_size} rank(s) = {batch_size * world_size}")


class TorchvisionSource:
    """Endless batches from an ImageFolder through a ``DataLoader``, on ``device``.

    Drops the last partial batch of each epoch (every step has the same batch) and calls
    ``set_epoch`` on the ``DistributedSampler`` at each new epoch.
    """

    backend = TORCHVISION
    decoder = "cpu"

    def __init__(self, data_dir: str, image_size: int, batch_size: int, device, *,
                 rank: int = 0, world_size: int = 1, workers: int = 1):
        import torch
        from torchvision import datasets, transforms

        folder = datasets.ImageFolder(data_dir)
        transform = transforms.Compose([
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ])
        dataset = ImageFiles(folder.samples, transform)
        self.sampler = None
        if world_size > 1:
            self.sampler = torch.utils.data.distributed.DistributedSampler(
                dataset, num_replicas=world_size, rank=rank, shuffle=True, drop_last=True)
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, shuffle=self.sampler is None, sampler=self.sampler,
            num_workers=workers, pin_memory=device.type == "cuda", drop_last=True,
            prefetch_factor=2 if workers else None, persistent_workers=workers > 0)
        if len(self.loader) == 0:
            raise _too_small(data_dir, len(dataset), batch_size, world_size)
        self.device = device
        self.workers = workers
        self.epoch = 0
        self.bytes_read = 0
        self.samples = 0
        self._iterator = None

    def next(self):
        """The next ``(images, labels)`` on the device; a new epoch starts when one ends."""
        while True:
            if self._iterator is None:
                if self.sampler is not None:
                    self.sampler.set_epoch(self.epoch)
                self._iterator = iter(self.loader)
            try:
                images, labels, sizes = next(self._iterator)
                break
            except StopIteration:
                self._iterator = None
                self.epoch += 1
        self.bytes_read += int(sizes.sum())
        self.samples += len(labels)
        return images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)

    def close(self) -> None:
        """Stop the persistent worker processes."""
        self._iterator = None
        self.loader = None


class DaliSource:
    """Endless batches from an ImageFolder through a DALI pipeline, on ``device``.

    ``fn.readers.file`` shards the files per rank (``shard_id=rank``,
    ``num_shards=world_size``) and shuffles them.  On CUDA, ``mixed`` decoding puts the
    images on the GPU; on the CPU the pipeline has no device (``device_id=None``).  The
    file sizes come out of the pipeline as a third output (the encoded tensors' shapes).
    """

    backend = DALI

    def __init__(self, data_dir: str, image_size: int, batch_size: int, device, *,
                 rank: int = 0, world_size: int = 1, workers: int = 1):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        on_gpu = device.type == "cuda"
        self.decoder = "mixed" if on_gpu else "cpu"
        pipe = _dali_pipeline(data_dir, rank, world_size, image_size, self.decoder,
                              batch_size=batch_size, num_threads=workers,
                              device_id=device.index if on_gpu else None, seed=12345 + rank)
        pipe.build()
        files = pipe.reader_meta("Reader")["epoch_size"]
        if files // world_size < batch_size:
            raise _too_small(data_dir, files, batch_size, world_size)
        self.iterator = DALIGenericIterator([pipe], ["images", "labels", "sizes"], reader_name="Reader",
                                            last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
        self.device = device
        self.workers = workers
        self.bytes_read = 0
        self.samples = 0

    def next(self):
        """The next ``(images, labels)`` on the device; the iterator rewinds itself at an epoch's end."""
        try:
            out = next(self.iterator)
        except StopIteration:
            out = next(self.iterator)
        batch = out[0]
        labels = batch["labels"].reshape(-1).long()
        self.bytes_read += int(batch["sizes"].sum())
        self.samples += len(labels)
        return (batch["images"].to(self.device, non_blocking=True),
                labels.to(self.device, non_blocking=True))

    def close(self) -> None:
        self.iterator = None


def _dali_pipeline(data_dir: str, shard: int, shards: int, size: int, decoder: str, **pipeline_args):
    """NVIDIA's training pipeline: read, decode with a random crop, resize, mirror, normalize."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(**pipeline_args)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=data_dir, shard_id=shard, num_shards=shards,
                                        random_shuffle=True, name="Reader")
        sizes = jpegs.shape()  # on the CPU: the encoded bytes of each file
        images = fn.decoders.image_random_crop(jpegs, device=decoder, output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3])
        images = fn.resize(images, resize_x=size, resize_y=size)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(size, size),
                                          mean=[255 * m for m in MEAN], std=[255 * s for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels, sizes

    return pipeline()


def make_source(backend: str, data_dir: str | None, settings: Mapping[str, Any], batch_size: int, device,
                *, rank: int = 0, world_size: int = 1, workers: int | None = None):
    """The source of ``backend`` for one rank; ``workers=None``: :func:`default_workers`."""
    if backend not in (TORCHVISION, DALI):
        raise DataError(f"data: {backend!r} has no source; expected {TORCHVISION} or {DALI}")
    if not data_dir:
        raise DataError(f"data={backend}: the worker spec has no data_dir (--dlperf-data-dir)")
    scan_image_folder(data_dir)
    if workers is None:
        workers = default_workers(local_world_size(world_size=world_size))
    cls = TorchvisionSource if backend == TORCHVISION else DaliSource
    return cls(data_dir, int(settings["image_size"]), batch_size, device, rank=rank, world_size=world_size,
               workers=workers)


class DataOnlyStep:
    """A "step" that only fetches the next batch: the loader timed without a model.

    It has the interface :func:`pytest_dlperf.worker.windows.time_windows` times (call, ``sync``,
    ``last_loss``), so data-only windows are timed exactly as training windows are.
    """

    last_loss = None

    def __init__(self, source, device):
        self.source = source
        self.device = device
        self.batch = None

    def __call__(self) -> None:
        self.batch = self.source.next()

    def sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)


class WindowMeter:
    """The bytes and samples a source delivers over the measured windows.

    The worker's ``time_windows`` calls a sampler's ``start()`` after the warm-up and its
    ``stop()`` after the last window; the meter takes that place and passes both calls on
    to the telemetry sampler (``then``), so neither moves.
    """

    def __init__(self, source, then=None):
        self.source = source
        self.then = then
        self._start: tuple[int, int] | None = None
        self._stop: tuple[int, int] | None = None

    def start(self) -> None:
        self._start = (self.source.bytes_read, self.source.samples)
        if self.then is not None:
            self.then.start()

    def stop(self) -> None:
        if self._stop is None and self._start is not None:
            self._stop = (self.source.bytes_read, self.source.samples)
        if self.then is not None:
            self.then.stop()

    def rank_figures(self, windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """This rank's bytes and samples over its windows, and the windows' seconds."""
        start, stop = self._start or (0, 0), self._stop or (0, 0)
        return {"bytes": stop[0] - start[0], "samples": stop[1] - start[1],
                "seconds": sum(w["seconds"] for w in windows)}


def figures(source, mode: str, per_rank: Sequence[Mapping[str, Any]],
            windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The worker result's ``data`` object for the job.

    ``per_rank`` are the ranks' :meth:`WindowMeter.rank_figures`; ``windows`` the job's
    (global) windows.  Bytes add up over the ranks and are divided by the windows'
    seconds (the slowest rank's); samples/s is the median window, as the case's figure.
    """
    total = sum(r["bytes"] for r in per_rank)
    samples = sum(r["samples"] for r in per_rank)
    seconds = sum(w["seconds"] for w in windows)
    return {
        "backend": source.backend, "mode": mode, "decoder": source.decoder, "workers": source.workers,
        "samples_per_second": statistics.median(w["throughput"] for w in windows),
        "megabytes_per_second": total / seconds / MB,
        "bytes_per_sample": total / samples if samples else 0.0,
        "bytes": total, "samples": samples, "seconds": seconds,
    }
