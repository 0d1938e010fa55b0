"""A convergence case's goal: target, budget and recipe, from its baseline entry, checked at collection."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import data, models
from ..protocol import ConvergenceSpec

if TYPE_CHECKING:
    from ..baseline import Baseline, Entry
    from ..cases import Case

#: The recipe where the entry gives none: Goyal et al. 2017's reference rate and warm-up.
DEFAULT_RECIPE = {"lr": 0.1, "warmup_epochs": 1.0, "eval_every": None}
SPLITS = ("train", "val")


def goal_of(case: Case, entry: Entry | None) -> ConvergenceSpec:
    """The worker's :class:`ConvergenceSpec` of a convergence case and its entry's budget."""
    target = dict(case.target)
    recipe = {**DEFAULT_RECIPE, **dict(case.recipe)}
    budget = (entry.budget if entry is not None else None) or {}
    return ConvergenceSpec(metric=target["metric"], target=float(target["value"]), max_epochs=budget.get("epochs"),
                           max_seconds=budget.get("seconds"), lr=float(recipe["lr"]),
                           warmup_epochs=float(recipe["warmup_epochs"]), eval_every=recipe["eval_every"])


def _where(baseline: Baseline | None, entry: Entry | None, field: str) -> str:
    if entry is not None and baseline is not None:
        return f"{entry.file or baseline.path}: $.cases[{entry.index}].{field}"
    return field


def check_split(root: str, split: str) -> tuple[str, ...]:
    """The classes of ``root/split``; :class:`data.DataError` naming the option when it is not an ImageFolder."""
    path = os.path.join(root, split)
    try:
        return data.scan_image_folder(path)
    except data.DataError as exc:
        raise data.DataError(f"--dlperf-convergence-data: {root} needs a {split}/ split in the ImageFolder "
                             f"layout ({split}/CLASS/IMAGE; `dlperf dataset --learnable` writes one): "
                             f"{str(exc).split(': ', 1)[-1]}") from None


def check_cases(cases: Iterable[tuple[Case, Entry | None]], baseline: Baseline | None,
                data_dir: str | None) -> None:
    """Raise :class:`ValueError` with one line naming the entry or option for a convergence case that cannot run."""
    for case, entry in cases:
        if not case.converges:
            continue
        where = _where(baseline, entry, "target")
        spec = models.get_model_spec(case.model)
        if spec.task != data.IMAGE_TASK:
            raise ValueError(f"{where}: {case.id}: convergence cases train {data.IMAGE_TASK} models on an image "
                             f"folder; {case.model!r} is not one")
        if case.searches_batch:
            raise ValueError(f"{_where(baseline, entry, 'batch_size')}: {case.id}: a convergence case needs a "
                             "fixed batch size, not \"max\" (the learning rate scales with it)")
        if data.backend_of(case.settings_dict) == data.SYNTHETIC:
            raise ValueError(f"{_where(baseline, entry, 'settings.data')}: {case.id}: a convergence case trains on "
                             f"real data; set data to {data.TORCHVISION} or {data.DALI}")
        if entry is None or not entry.budget:
            raise ValueError(f"{_where(baseline, entry, 'budget')}: {case.id}: a convergence case needs a budget "
                             "(epochs, seconds or both)")
        if not data_dir:
            raise ValueError(f"--dlperf-convergence-data: {case.id} is a convergence case; give the data set "
                             "with train/ and val/ splits (`dlperf dataset --learnable --out DIR` writes one)")
        train, val = (check_split(data_dir, split) for split in SPLITS)
        if train != val:
            raise ValueError(f"--dlperf-convergence-data: {data_dir}: the train/ and val/ splits have different "
                             f"classes ({len(train)} and {len(val)})")
        classes = spec.settings(case.settings_dict).get("num_classes")
        if isinstance(classes, int) and classes < len(train):
            raise ValueError(f"{_where(baseline, entry, 'settings.num_classes')}: {case.id}: {classes} classes, "
                             f"but {data_dir} has {len(train)}")


def describe(goal: ConvergenceSpec) -> str:
    """``top1 >= 0.9 within 8 epochs / 60 s``."""
    sign = ">=" if goal.metric != "loss" else "<="
    limits = [f"{goal.max_epochs:g} epochs" if goal.max_epochs else "", f"{goal.max_seconds:g} s"
              if goal.max_seconds else ""]
    return f"{goal.metric} {sign} {goal.target:g} within {' / '.join(x for x in limits if x)}"

