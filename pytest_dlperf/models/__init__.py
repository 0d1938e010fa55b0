"""Models: a registry (:mod:`.registry`, which imports no model file) and the built-ins.

The built-in families register themselves when this package is imported, as timm's model
files do: :mod:`.vision` (ResNet-50, ResNet-18, VGG16, tiny) and :mod:`.language`
(BERT-base, BERT-Tiny, GPT-2; their factories need the ``transformers`` extra).
"""

from __future__ import annotations

from .registry import (OPTIMIZERS, UNITS, ModelSpec, Task, UnknownModelError, create_model, ensure_registered,
                       get_model_spec, list_models, module_available, register_model, register_task, restore,
                       snapshot)

from . import language, vision  # noqa: E402,F401  isort: skip  (they register themselves)

__all__ = ["OPTIMIZERS", "UNITS", "ModelSpec", "Task", "UnknownModelError", "create_model", "ensure_registered",
           "get_model_spec", "list_models", "module_available", "register_model", "register_task", "restore",
           "snapshot"]
