"""Models: a registry (:mod:`.registry`, which imports no model file), the tasks and the built-ins.

The tasks and built-in families register themselves when this package is imported, as
timm's model files do: :mod:`.tasks` (language-modeling, sequence-classification,
regression), :mod:`.vision` (the image-classification task; ResNet-50, ResNet-18, VGG16,
tiny) and :mod:`.language` (the bert-pretraining task; BERT-base, BERT-Tiny, GPT-2: their
factories need the ``transformers`` extra).  docs/models.md is the contract for a model
of one's own.
"""

from __future__ import annotations

from .registry import (OPTIMIZERS, UNITS, ModelSpec, Task, UnknownModelError, batch_bytes, create_model,
                       ensure_registered, get_model_spec, get_task, list_models, list_tasks, module_available,
                       register_batch_bytes, register_model, register_task, restore, snapshot)

from . import tasks, language, vision  # noqa: E402,F401  isort: skip  (they register themselves)

__all__ = ["OPTIMIZERS", "UNITS", "ModelSpec", "Task", "UnknownModelError", "batch_bytes", "create_model",
           "ensure_registered", "get_model_spec", "get_task", "list_models", "list_tasks", "module_available",
           "register_batch_bytes", "register_model", "register_task", "restore", "snapshot"]
