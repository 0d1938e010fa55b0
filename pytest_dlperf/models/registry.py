"""The model registry: ``register_model``, ``get_model_spec``, ``create_model``, ``list_models``.

A model is registered once, by name, with everything a worker needs to train it on
synthetic data: a factory that builds the ``nn.Module`` from the case's settings, a
function that makes one batch on the device, a loss, an optimizer and the unit its
throughput is reported in.  Most models share those pieces through a *task*
(``"image-classification"``), so registering a user model from a ``conftest.py``
takes one decorator::

    from pytest_dlperf import register_model

    @register_model("mynet", task="image-classification", batch_size=64,
                    defaults={"image_size": 64, "num_classes": 100})
    def mynet(settings):
        return MyNet(num_classes=settings["num_classes"])

Each worker runs in a fresh process, so the registry remembers the file that
registered a model (``ModelSpec.source``); the worker imports that file again before it
looks the model up (:func:`ensure_registered`).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..registry import Registry
from .validation import check_callable, check_choice, check_mapping

#: Throughput units.  ``samples/s`` is the generic one: a sample is whatever one batch row is.
UNITS = ("img/s", "seq/s", "tokens/s", "samples/s")


class UnknownModelError(LookupError):
    """A case names a model that nobody registered."""

    def __init__(self, name: str, known: Iterable[str]):
        self.name = name
        self.known = sorted(known)
        super().__init__(
            f"unknown model {name!r}; registered models: {', '.join(self.known) or '(none)'}"
        )


@dataclasses.dataclass(frozen=True)
class Task:
    """What a family of models shares: how a batch is made and how the loss is computed.

    ``items_per_sample(settings)``, if given, is how many units of throughput one batch row
    is (``seq_len`` for a tokens/s task); models of the task inherit it, as they inherit
    the rest.  ``description`` is one line for the docs and ``list_tasks``.
    """

    name: str
    make_batch: Callable[[int, Mapping[str, Any], Any], Any]
    loss: Callable[[Any, Any], Any]
    unit: str
    defaults: Mapping[str, Any]
    channels_last: bool = False
    optimizer: str = "sgd"
    items_per_sample: Callable[[Mapping[str, Any]], int] | None = None
    description: str = ""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Everything the worker needs to build and train one registered model."""

    name: str
    factory: Callable[[Mapping[str, Any]], Any]
    make_batch: Callable[[int, Mapping[str, Any], Any], Any]
    loss: Callable[[Any, Any], Any]
    unit: str = "img/s"
    optimizer: str = "sgd"
    batch_size: int = 32
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    channels_last: bool = False
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)
    items_per_sample: Callable[[Mapping[str, Any]], int] | None = None
    description: str = ""
    source: str | None = None
    module: str | None = None
    task: str | None = None  # the registered task it shares batches and loss with, if any
    #: The ``torch.compile`` mode its cases train in on CUDA where their settings do not say ``compile`` (None:
    #: eager): a recipe whose eager step leaves the GPU idle (bert-base's: docs/gpu.md).
    cuda_compile: str | None = None

    def settings(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The model's default settings with the case's explicit settings on top."""
        merged = dict(self.defaults)
        merged.update(overrides or {})
        return merged

    def samples_per_batch(self, batch_size: int, settings: Mapping[str, Any]) -> int:
        """How many units of throughput one batch is (tokens/s counts every token)."""
        per_sample = self.items_per_sample(settings) if self.items_per_sample else 1
        return batch_size * per_sample

    def missing_requirements(self) -> list[str]:
        """The ``requires`` entries whose module cannot be imported here, as skip reasons."""
        missing = []
        for module, extra in self.requires.items():
            if not module_available(module):
                missing.append(f"needs the {extra} extra (module {module!r} is not installed)")
        return missing


def module_available(module: str) -> bool:
    """Whether ``module`` (dotted names too: ``nvidia.dali``) can be imported here."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def _taken(name: str, existing: ModelSpec, new: ModelSpec) -> str:
    return f"model {name!r} is already registered by {existing.source}; {new.source} registers it again"


#: The registered models: a name given again by the file that gave it (a conftest imported twice) replaces it.
MODELS: Registry[ModelSpec] = Registry("model", same=lambda old, new: old.source == new.source, taken=_taken)
TASKS: Registry[Task] = Registry("task", same=lambda old, new: True)
OPTIMIZERS = ("sgd", "adamw")


#: The bytes of one batch a built-in ``make_batch`` makes, counted by arithmetic: ``count(batch_size, settings)``.
#: Collection checks that a case's batch fits the machine (``collect._too_big``); with a count here it does so
#: without importing torch in the controller (a pytest session's start pays 1.7 s for torch otherwise); any
#: other ``make_batch`` is run on the meta device.  tests/test_models.py checks each count against that.
BATCH_BYTES: dict[Callable[..., Any], Callable[[int, Mapping[str, Any]], int]] = {}


def register_batch_bytes(make_batch: Callable[..., Any]):
    """Decorator: the function below counts the bytes of ``make_batch``'s batch (:data:`BATCH_BYTES`)."""
    def decorator(count: Callable[[int, Mapping[str, Any]], int]):
        BATCH_BYTES[make_batch] = count
        return count
    return decorator


def batch_bytes(make_batch: Callable[..., Any], batch_size: int, settings: Mapping[str, Any]) -> int | None:
    """The bytes of ``make_batch``'s batch by its registered count, None where it has none."""
    count = BATCH_BYTES.get(make_batch)
    return None if count is None else int(count(batch_size, settings))


def register_task(task: Task) -> Task:
    """Register ``task`` under its name, after the checks :func:`register_model` makes too."""
    who = f"task {task.name!r}"
    check_callable(who, "make_batch", task.make_batch)
    check_callable(who, "loss", task.loss)
    if task.items_per_sample is not None:
        check_callable(who, "items_per_sample", task.items_per_sample)
    check_choice(who, "unit", task.unit, UNITS)
    check_choice(who, "optimizer", task.optimizer, OPTIMIZERS)
    check_mapping(who, "defaults", task.defaults, "setting names to values")
    return TASKS.add(task.name, task)


def list_tasks() -> list[str]:
    return sorted(TASKS)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def register_model(
    name: str | None = None,
    *,
    task: str | None = None,
    make_batch: Callable | None = None,
    loss: Callable | None = None,
    unit: str | None = None,
    optimizer: str | None = None,
    batch_size: int = 32,
    defaults: Mapping[str, Any] | None = None,
    channels_last: bool | None = None,
    requires: Mapping[str, str] | None = None,
    items_per_sample: Callable[[Mapping[str, Any]], int] | None = None,
    description: str = "",
    factory: Callable | None = None,
    cuda_compile: str | None = None,
):
    """Register a model factory under ``name`` (default: the function's name).

    Use as a decorator, or call with ``factory=``.  ``task`` supplies ``make_batch``,
    ``loss``, ``unit``, ``optimizer``, ``defaults``, ``channels_last`` and
    ``items_per_sample``; anything given explicitly wins (``defaults`` are merged).
    ``cuda_compile``: the ``torch.compile`` mode (``cases.COMPILE_MODES``) its cases train in on CUDA unless their
    settings say ``compile``; eager where None, and always on the CPU.
    ``requires`` maps an importable module to the extra that provides it, e.g.
    ``{"transformers": "transformers"}``: a case of this model is skipped with that reason
    where the module is missing.  The worker calls ``factory(settings)``,
    ``make_batch(batch_size, settings, device)`` and ``loss(model, batch)``; what is given
    is checked here (:mod:`.validation`), and a mistake is one ``ValueError`` naming the model.
    docs/models.md is the whole contract.
    """

    given = dict(task=task, make_batch=make_batch, loss=loss, unit=unit, optimizer=optimizer, batch_size=batch_size,
                 defaults=defaults, channels_last=channels_last, requires=requires, items_per_sample=items_per_sample,
                 description=description, cuda_compile=cuda_compile)

    def decorator(fn: Callable) -> Callable:
        check_name(name if name is not None else getattr(fn, "__name__", None))
        add_spec(_build_spec(name or fn.__name__, fn, **given))
        return fn

    if factory is not None:
        return decorator(factory)
    return decorator


def _build_spec(model_name: str, fn: Callable, *, task: str | None, make_batch: Callable | None, loss: Callable | None,
                unit: str | None, optimizer: str | None, batch_size: int, defaults: Mapping[str, Any] | None,
                channels_last: bool | None, requires: Mapping[str, str] | None,
                items_per_sample: Callable[[Mapping[str, Any]], int] | None, description: str,
                cuda_compile: str | None = None) -> ModelSpec:
    """The checked spec of a model :func:`register_model` registers (``fn``: its factory)."""
    who = f"model {model_name!r}"
    base = None
    if task is not None:
        if task not in TASKS:
            raise ValueError(f"{who}: unknown task {task!r}; known tasks: {', '.join(sorted(TASKS))}")
        base = TASKS[task]
    check_callable(who, "factory", fn)
    if defaults is not None:
        check_mapping(who, "defaults", defaults, "setting names to values")
    if requires is not None:
        check_mapping(who, "requires", requires, "importable modules to the extras that provide them")
    batch_fn = make_batch if make_batch is not None else (base.make_batch if base else None)
    loss_fn = loss if loss is not None else (base.loss if base else None)
    if batch_fn is None or loss_fn is None:
        raise ValueError(f"{who}: give a task, or both make_batch and loss; known tasks: "
                         f"{', '.join(sorted(TASKS))}")
    check_callable(who, "make_batch", batch_fn)
    check_callable(who, "loss", loss_fn)
    the_unit = unit or (base.unit if base else "img/s")
    check_choice(who, "unit", the_unit, UNITS)
    # The task's count of units per row goes with the task's unit (tokens per sequence
    # means nothing to a model that reports seq/s instead).
    per_sample = items_per_sample if items_per_sample is not None else (
        base.items_per_sample if base and the_unit == base.unit else None)
    if per_sample is not None:
        check_callable(who, "items_per_sample", per_sample)
    the_optimizer = optimizer or (base.optimizer if base else "sgd")
    check_choice(who, "optimizer", the_optimizer, OPTIMIZERS)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{who}: batch_size must be a positive integer, not {batch_size!r}")
    if cuda_compile is not None:
        from ..cases import COMPILE_MODES

        check_choice(who, "cuda_compile", cuda_compile, COMPILE_MODES)
    merged_defaults = dict(base.defaults) if base else {}
    merged_defaults.update(defaults or {})
    return ModelSpec(
        name=model_name,
        factory=fn,
        make_batch=batch_fn,
        loss=loss_fn,
        unit=the_unit,
        optimizer=the_optimizer,
        batch_size=batch_size,
        defaults=merged_defaults,
        channels_last=channels_last if channels_last is not None else bool(base and base.channels_last),
        requires=dict(requires or {}),
        items_per_sample=per_sample,
        description=description or (inspect.getdoc(fn) or "").split("\n")[0],
        source=_source_file(fn),
        module=getattr(fn, "__module__", None),
        task=task,
        cuda_compile=cuda_compile,
    )



def add_spec(spec: ModelSpec) -> ModelSpec:
    """Register a spec built elsewhere (a command case: :mod:`pytest_dlperf.commands`) under its name;
    ``ValueError`` when another file registered that name."""
    check_name(spec.name)
    return MODELS.add(spec.name, spec)


def name_pattern() -> str:
    """The pattern a model name matches: the baseline schema's (``$defs.case.properties.model``)."""
    from .. import jsonio

    return jsonio.schema("baseline")["$defs"]["case"]["properties"]["model"]["pattern"]


def check_name(name: Any) -> None:
    """Raise ``ValueError`` for a model name that no baseline could name (``a/b``, ``../x``, empty):
    a name is also part of case ids, markers and folder names."""
    pattern = name_pattern()
    if not isinstance(name, str) or re.fullmatch(pattern, name) is None:
        raise ValueError(f"model name {name!r} is not allowed: a model name matches {pattern} (a letter or "
                         f"digit, then letters, digits, '_', '.', '+' or '-')")


def _source_file(fn: Callable) -> str | None:
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        return None
    return os.path.abspath(path) if path else None


def list_models() -> list[str]:
    return sorted(MODELS)


def get_model_spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise UnknownModelError(name, MODELS)
    return MODELS[name]


def create_model(name: str, settings: Mapping[str, Any] | None = None):
    """Build the ``nn.Module`` of a registered model with its default settings and ``settings``."""
    spec = get_model_spec(name)
    return spec.factory(spec.settings(settings))


def snapshot() -> dict[str, ModelSpec]:
    """A copy of the registry, to restore after a session that registered models of its own."""
    return MODELS.snapshot()


def restore(saved: Mapping[str, ModelSpec]) -> None:
    MODELS.restore(saved)


def ensure_registered(name: str, source: str | None, module: str | None) -> ModelSpec:
    """Look ``name`` up, importing the file (or module) that registered it first if needed.

    The controller sends the worker the model's ``source`` file and ``module`` name.  A
    module that imports as the same file (an installed package) is imported by name;
    anything else (a ``conftest.py``) is imported from its path, with its folder on
    ``sys.path`` as pytest's default import mode has it.
    """
    if name in MODELS:
        return MODELS[name]
    if module and module != "__main__" and _module_is_file(module, source):
        importlib.import_module(module)
    elif source:
        _import_path(source)
    return get_model_spec(name)


def _module_is_file(module: str, source: str | None) -> bool:
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if found is None or found.origin is None:
        return False
    return source is None or os.path.abspath(found.origin) == source


def _import_path(path: str) -> None:
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = "_dlperf_models_" + str(abs(hash(path)))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the model file {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    spec.loader.exec_module(mod)


