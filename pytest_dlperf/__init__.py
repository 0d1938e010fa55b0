"""pytest-dlperf: deep-learning training-throughput benchmarks as pytest tests."""

from .cases import PRECISIONS, Case
from .commands import register_command
from .models import ModelSpec, Task, create_model, get_model_spec, list_models, register_model, register_task

__version__ = "0.9.0"

__all__ = [
    "PRECISIONS",
    "Case",
    "ModelSpec",
    "Task",
    "__version__",
    "create_model",
    "get_model_spec",
    "list_models",
    "register_command",
    "register_model",
    "register_task",
]
