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
figures in the result's ``convergence`` (``docs/worker-result.md``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any

from ..protocol import ConvergenceSpec, WorkerResult, WorkerSpec, WorkerStatus
from .lifecycle import Held, ProgressFile, launched_at, timing

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


@dataclasses.dataclass
class Schedule:
    """A convergence run's steps: per epoch, between evaluations, of the warm-up and of the whole budget."""

    global_batch: int
    steps_per_epoch: int
    eval_every: int
    warmup: int
    max_steps: int | None  # None: the budget is in seconds only
    peak_lr: float

    @classmethod
    def of(cls, goal: ConvergenceSpec, global_batch: int, train_images: int) -> Schedule:
        steps_per_epoch = train_images // global_batch
        max_steps = math.ceil(goal.max_epochs * steps_per_epoch) if goal.max_epochs else None
        return cls(global_batch, steps_per_epoch, goal.eval_every or steps_per_epoch,
                   round(goal.warmup_epochs * steps_per_epoch), max_steps, goal.lr * global_batch / 256)

    @property
    def evals_total(self) -> int | None:
        return math.ceil(self.max_steps / self.eval_every) if self.max_steps else None


def run(spec: WorkerSpec, result: WorkerResult) -> None:
    """Train ``spec.case`` to ``spec.convergence``; fill ``result`` (rank 0: its ``convergence``)."""
    import torch
    from torchvision import datasets

    from .. import data
    from .distributed import ProcessGroup, choose_backend
    from .prepare import prepare

    goal: ConvergenceSpec = spec.convergence
    ranks, model_spec, settings, device, _ = prepare(spec, result)
    global_batch = spec.case.batch_size * ranks.world_size
    result.samples_per_step = global_batch
    launched = launched_at(spec)
    torch.manual_seed(spec.run_index)
    train_dir, val_dir = os.path.join(spec.data_dir or "", "train"), os.path.join(spec.data_dir or "", "val")
    classes = datasets.ImageFolder(train_dir).classes
    if len(classes) > int(settings.get("num_classes", len(classes))):
        raise data.DataError(f"{train_dir} has {len(classes)} classes; the model has num_classes "
                             f"{settings['num_classes']}")
    train_images = len(datasets.ImageFolder(train_dir).samples)
    schedule = Schedule.of(goal, global_batch, train_images)
    if schedule.steps_per_epoch < 1:
        raise data.DataError(f"{train_dir} has {train_images} images, fewer than one global batch ({global_batch})")
    distributed = ranks.distributed or spec.distributed
    with Held(ProcessGroup(ranks, device, backend=choose_backend(device.type, spec.dist_backend, spec.share_gpus))
              if distributed else None) as held:
        validation = _start(spec, held, model_spec, settings, device, ranks, train_dir, val_dir, classes)
        trained = _train(spec, goal, held, validation, schedule, distributed, device, ranks)
    curve, windows, marks = trained.curve, trained.windows, trained.marks
    result.windows = windows
    result.final_loss = _finite(trained.train_loss)
    result.timing = timing(launched, marks, windows, total=time.time(), warmup_seconds=0.0,
                           convergence_seconds=trained.seconds)
    if ranks.rank == 0:
        reached_at = trained.reached_at
        result.convergence = {
            "metric": goal.metric, "target": goal.target, "reached": reached_at is not None,
            "stopped": trained.stopped,
            "seconds_to_target": reached_at["seconds"] if reached_at else None,
            "epochs_to_target": reached_at["epoch"] if reached_at else None,
            "samples_to_target": reached_at["samples"] if reached_at else None,
            "final": curve[-1][goal.metric], "curve": curve, "seconds": trained.seconds,
            "samples": trained.steps * global_batch, "epochs": trained.steps / schedule.steps_per_epoch,
            "throughput": trained.steps * global_batch / trained.seconds, "seed": spec.run_index,
            "lr": schedule.peak_lr, "global_batch": global_batch,
        }
    result.status = WorkerStatus.OK


def _start(spec: WorkerSpec, held: Held, model_spec, settings: dict[str, Any], device, ranks, train_dir: str,
           val_dir: str, classes: list[str]) -> Validation:
    """The train split's source (seeded with the run's index), the training step and its optimizer, in ``held``;
    returns this rank's shard of the validation split."""
    from .. import data
    from .training import TrainingStep, make_optimizer

    case, seed = spec.case, spec.run_index
    held.source = data.make_source(data.backend_of(settings), train_dir, settings, case.batch_size, device,
                                   rank=ranks.rank, world_size=ranks.world_size, workers=spec.data_workers)
    if getattr(held.source, "sampler", None) is not None:
        held.source.sampler.seed = seed  # DistributedSampler shuffles by seed + epoch
    held.step = TrainingStep(model_spec, case, settings, device, wrap=held.group.wrap if held.group else None,
                             source=held.source)
    held.step.optimizer = make_optimizer(model_spec.optimizer, held.step.model.parameters(), device)
    held.model = held.step.model.module if hasattr(held.step.model, "module") else held.step.model
    return Validation(val_dir, classes, int(settings["image_size"]), device, ranks.rank, ranks.world_size,
                      held.step.channels_last)


@dataclasses.dataclass
class Trained:
    """What a convergence run's training loop reached."""

    curve: list[dict[str, Any]]
    windows: list[dict[str, Any]]
    marks: dict[str, float]
    steps: int
    seconds: float  # of training and evaluation, from the first step
    stopped: str  # one of STOPS
    reached_at: dict[str, Any] | None  # the curve's point that reached the target
    train_loss: float | None


def _train(spec: WorkerSpec, goal: ConvergenceSpec, held: Held, validation: Validation, schedule: Schedule,
           distributed: bool, device, ranks) -> Trained:
    """Train and evaluate until the target, the budget or a loss that is no longer finite (all ranks agreeing)."""
    from .training import AUTOCAST

    progress = ProgressFile(spec.progress_path if ranks.rank == 0 else None, 0, schedule.evals_total or 0)
    progress(phase="measuring", windows_done=0)
    max_steps, batch = schedule.max_steps, schedule.global_batch
    trained = Trained([], [], {"first_step": time.time()}, 0, 0.0, "", None, None)
    start = time.perf_counter()
    while not trained.stopped:
        t0 = time.perf_counter()
        count = schedule.eval_every if max_steps is None else min(schedule.eval_every, max_steps - trained.steps)
        for _ in range(count):
            for param_group in held.step.optimizer.param_groups:
                param_group["lr"] = learning_rate(trained.steps, peak=schedule.peak_lr, warmup_steps=schedule.warmup,
                                                  total_steps=max_steps)
            held.step()
            trained.steps += 1
        held.step.sync()
        seconds = time.perf_counter() - t0
        trained.windows.append({"steps": count, "samples": count * batch, "seconds": seconds,
                                "throughput": count * batch / seconds})
        trained.train_loss = float(held.step.last_loss) if held.step.last_loss is not None else None
        metrics = validation.evaluate(held.model, AUTOCAST.get(spec.case.precision), distributed)
        elapsed = time.perf_counter() - start
        trained.curve.append({"seconds": elapsed, "samples": trained.steps * batch,
                              "epoch": trained.steps / schedule.steps_per_epoch, "step": trained.steps,
                              **{k: _finite(v) for k, v in metrics.items()},
                              "train_loss": _finite(trained.train_loss)})
        trained.stopped = STOPS[_agree(_stop_code(goal, metrics, trained, max_steps, elapsed), distributed, device)]
        if trained.stopped == "target":
            trained.reached_at = trained.curve[-1]
        remaining = (max_steps - trained.steps) if max_steps is not None else \
            max(0, round(((goal.max_seconds or 0) - elapsed) / max(seconds / count, 1e-9)))
        progress(seconds / count, 0 if trained.stopped else remaining, windows_done=len(trained.curve),
                 last_throughput=trained.windows[-1]["throughput"])
    trained.seconds = time.perf_counter() - start
    return trained


def _stop_code(goal: ConvergenceSpec, metrics: dict[str, float], trained: Trained, max_steps: int | None,
               elapsed: float) -> int:
    """This rank's reason to stop after an evaluation (:data:`STOPS`' index; 0: go on)."""
    if goal.reached(metrics[goal.metric]):
        return STOPS.index("target")
    if _finite(trained.train_loss) is None or _finite(metrics["loss"]) is None:
        return STOPS.index("diverged")
    if max_steps is not None and trained.steps >= max_steps:
        return STOPS.index("epochs")
    if goal.max_seconds is not None and elapsed >= goal.max_seconds:
        return STOPS.index("seconds")
    return 0
