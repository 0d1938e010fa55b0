"""The convergence worker: train a case to a target accuracy (or loss) and time it.

Run instead of the timed windows when the spec has a
:class:`~pytest_dlperf.protocol.ConvergenceSpec` (a convergence case,
:mod:`pytest_dlperf.convergence` on the controller's side).  Each rank:

1. builds the model, the training step of the case's precision (:class:`.training.TrainingStep`,
   under DDP for several ranks) and the train split's loader (``DATA_DIR/train`` through the
   case's data backend, :func:`pytest_dlperf.data.make_source`), seeded with the run's index;
2. loads its shard of the validation split (``DATA_DIR/val``, resized and center-cropped)
   onto the device once;
3. trains with SGD and momentum (AdamW for models that train with it) at a peak learning
   rate of ``lr x global batch / 256`` reached by a linear warm-up over ``warmup_epochs``
   and decayed by a half cosine over ``max_epochs`` (Goyal et al. 2017,
   https://arxiv.org/abs/1706.02677: linear scaling with the global batch and gradual warm-up);
4. every ``eval_every`` steps (default: every epoch) evaluates top-1, top-5 and the loss on
   the whole validation split, the ranks' counts summed with an all-reduce;
5. stops at the target, at the budget (``max_epochs``, ``max_seconds`` of training) or when
   the training loss is no longer finite (``diverged``).

The clock starts at the first training step, after the setup; the time to target is the
end of the evaluation that reached it (evaluation time included, as MLPerf counts it).
Each evaluation interval's training steps are also a window (samples over seconds), so the
run reports its training throughput as every case does.  Rank 0 writes the curve and the
figures in the result's ``convergence`` (``docs/result-format.md``).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from ..protocol import ConvergenceSpec, WorkerResult, WorkerSpec, WorkerStatus

#: Stop reasons, by precedence when the ranks disagree (an all-reduce keeps the largest).
STOPS = ("", "seconds", "epochs", "diverged", "target")


def learning_rate(step: int, *, peak: float, warmup_steps: int, total_steps: int | None) -> float:
    """The learning rate at ``step`` (0-based): linear warm-up to ``peak``, then a half cosine to 0 at
    ``total_steps`` (constant when the budget has no step count)."""
    if warmup_steps and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if not total_steps or total_steps <= warmup_steps:
        return peak
    done = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return peak * 0.5 * (1.0 + math.cos(math.pi * done))


class Validation:
    """This rank's shard of the validation split, on the device; :meth:`evaluate` sums every rank's counts."""

    def __init__(self, val_dir: str, classes: list[str], image_size: int, device, rank: int, world_size: int,
                 channels_last: bool):
        import torch
        from torchvision import datasets, transforms

        from ..data import MEAN, STD, DataError

        folder = datasets.ImageFolder(val_dir)
        if folder.classes != classes:
            raise DataError(f"{val_dir}: its classes {folder.classes} are not the train split's {classes}")
        transform = transforms.Compose([transforms.Resize(image_size), transforms.CenterCrop(image_size),
                                        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        mine = folder.samples[rank::world_size]
        self.size = len(folder.samples)
        images = torch.stack([transform(folder.loader(path)) for path, _ in mine]) if mine else \
            torch.empty(0, 3, image_size, image_size)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        self.images = images.to(device)
        self.labels = torch.tensor([label for _, label in mine], dtype=torch.long, device=device)
        self.device = device

    def evaluate(self, model, dtype, distributed: bool, chunk: int = 256) -> dict[str, float]:
        """Top-1, top-5 and mean cross-entropy over the whole split (all ranks)."""
        import torch
        import torch.nn.functional as F

        counts = torch.zeros(4, dtype=torch.float64, device=self.device)  # loss sum, top-1, top-5, n
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in range(0, len(self.labels), chunk):
                images, labels = self.images[start:start + chunk], self.labels[start:start + chunk]
                with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
                    logits = model(images)
                logits = logits.float()
                top = logits.topk(min(5, logits.shape[1]), dim=1).indices
                hits = top == labels[:, None]
                counts += torch.stack([F.cross_entropy(logits, labels, reduction="sum").double(),
                                       hits[:, 0].sum().double(), hits.any(dim=1).sum().double(),
                                       torch.tensor(float(len(labels)), dtype=torch.float64, device=self.device)])
        model.train(was_training)
        if distributed:
            import torch.distributed as dist

            dist.all_reduce(counts)
        loss, top1, top5, n = counts.tolist()
        return {"top1": top1 / n, "top5": top5 / n, "loss": loss / n}


def _finite(value: float | None) -> float | None:
    """``value``, or None where it is not a finite number (JSON has no NaN)."""
    return value if value is not None and math.isfinite(value) else None


def _agree(code: int, distributed: bool, device) -> int:
    """The stop reason all ranks take: the largest code any rank has."""
    if not distributed:
        return code
    import torch
    import torch.distributed as dist

    flag = torch.tensor([code], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


def run(spec: WorkerSpec, result: WorkerResult) -> None:
    """Train ``spec.case`` to ``spec.convergence``; fill ``result`` (rank 0: its ``convergence``)."""
    import torch
    from torchvision import datasets

    from .. import data
    from .distributed import ProcessGroup
    from .main import ProgressFile
    from .prepare import prepare
    from .training import AUTOCAST, TrainingStep, make_optimizer

    goal: ConvergenceSpec = spec.convergence
    ranks, model_spec, settings, device, _ = prepare(spec, result)
    case = spec.case
    global_batch = case.batch_size * ranks.world_size
    result.samples_per_step = global_batch
    launched = float(spec.launched_at) if spec.launched_at is not None else time.time()

    seed = spec.run_index
    torch.manual_seed(seed)
    train_dir, val_dir = os.path.join(spec.data_dir or "", "train"), os.path.join(spec.data_dir or "", "val")
    classes = datasets.ImageFolder(train_dir).classes
    if len(classes) > int(settings.get("num_classes", len(classes))):
        raise data.DataError(f"{train_dir} has {len(classes)} classes; the model has num_classes "
                             f"{settings['num_classes']}")
    train_images = len(datasets.ImageFolder(train_dir).samples)
    steps_per_epoch = train_images // global_batch
    if steps_per_epoch < 1:
        raise data.DataError(f"{train_dir} has {train_images} images, fewer than one global batch ({global_batch})")

    distributed = ranks.distributed or spec.distributed
    group = ProcessGroup(ranks, device) if distributed else None
    source = step = plain = None
    try:
        source = data.make_source(data.backend_of(settings), train_dir, settings, case.batch_size, device,
                                  rank=ranks.rank, world_size=ranks.world_size, workers=spec.data_workers)
        if getattr(source, "sampler", None) is not None:
            source.sampler.seed = seed  # DistributedSampler shuffles by seed + epoch
        step = TrainingStep(model_spec, case, settings, device, wrap=group.wrap if group else None, source=source)
        peak = goal.lr * global_batch / 256
        step.optimizer = make_optimizer(model_spec.optimizer, step.model.parameters(), device)
        validation = Validation(val_dir, classes, int(settings["image_size"]), device, ranks.rank,
                                ranks.world_size, step.channels_last)
        plain = step.model.module if hasattr(step.model, "module") else step.model
        eval_every = goal.eval_every or steps_per_epoch
        warmup = round(goal.warmup_epochs * steps_per_epoch)
        max_steps = math.ceil(goal.max_epochs * steps_per_epoch) if goal.max_epochs else None
        evals_total = math.ceil(max_steps / eval_every) if max_steps else None
        progress = ProgressFile(spec.progress_path if ranks.rank == 0 else None, 0, evals_total or 0)
        progress(phase="measuring", windows_done=0)
        curve: list[dict[str, Any]] = []
        windows: list[dict[str, Any]] = []
        done, reached_at, stopped, train_loss = 0, None, "", None
        start = time.perf_counter()
        marks = {"first_step": time.time()}
        while not stopped:
            t0 = time.perf_counter()
            count = eval_every if max_steps is None else min(eval_every, max_steps - done)
            for _ in range(count):
                for param_group in step.optimizer.param_groups:
                    param_group["lr"] = learning_rate(done, peak=peak, warmup_steps=warmup, total_steps=max_steps)
                step()
                done += 1
            step.sync()
            seconds = time.perf_counter() - t0
            windows.append({"steps": count, "samples": count * global_batch, "seconds": seconds,
                            "throughput": count * global_batch / seconds})
            train_loss = float(step.last_loss) if step.last_loss is not None else None
            metrics = validation.evaluate(plain, AUTOCAST.get(case.precision), distributed)
            elapsed = time.perf_counter() - start
            curve.append({"seconds": elapsed, "samples": done * global_batch, "epoch": done / steps_per_epoch,
                          "step": done, **{k: _finite(v) for k, v in metrics.items()},
                          "train_loss": _finite(train_loss)})
            if goal.reached(metrics[goal.metric]):
                code = STOPS.index("target")
            elif _finite(train_loss) is None or _finite(metrics["loss"]) is None:
                code = STOPS.index("diverged")
            elif max_steps is not None and done >= max_steps:
                code = STOPS.index("epochs")
            elif goal.max_seconds is not None and elapsed >= goal.max_seconds:
                code = STOPS.index("seconds")
            else:
                code = 0
            stopped = STOPS[_agree(code, distributed, device)]
            if stopped == "target":
                reached_at = curve[-1]
            remaining = (max_steps - done) if max_steps is not None else \
                max(0, round(((goal.max_seconds or 0) - elapsed) / max(seconds / count, 1e-9)))
            progress(seconds / count, 0 if stopped else remaining, windows_done=len(curve),
                     last_throughput=windows[-1]["throughput"])
        total = time.perf_counter() - start
    finally:
        if source is not None:
            source.close()
        step = plain = None  # the DDP model goes before its process group: see ProcessGroup.close
        if group is not None:
            group.close()
    result.windows = windows
    result.final_loss = _finite(train_loss)
    result.timing = {"setup_seconds": marks["first_step"] - launched, "warmup_seconds": 0.0,
                     "measured_seconds": sum(w["seconds"] for w in windows),
                     "total_seconds": time.time() - launched, "convergence_seconds": total}
    if ranks.rank == 0:
        result.convergence = {
            "metric": goal.metric, "target": goal.target, "reached": reached_at is not None, "stopped": stopped,
            "seconds_to_target": reached_at["seconds"] if reached_at else None,
            "epochs_to_target": reached_at["epoch"] if reached_at else None,
            "samples_to_target": reached_at["samples"] if reached_at else None,
            "final": curve[-1][goal.metric], "curve": curve, "seconds": total, "samples": done * global_batch,
            "epochs": done / steps_per_epoch, "throughput": done * global_batch / total, "seed": seed,
            "lr": peak, "global_batch": global_batch,
        }
    result.status = WorkerStatus.OK
