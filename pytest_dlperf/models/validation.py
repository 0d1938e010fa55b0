"""Checks of what ``register_model`` and ``register_task`` are given, each a one-line ``ValueError``.

A mistake in a registration (a ``make_batch`` that takes two arguments, a misspelled unit)
would otherwise surface in a worker process, as a traceback far from the line that caused
it.  Each check raises with a message that starts with who is being registered
(``model 'mynet'`` or ``task 'my-task'``), names the problem, and says what is expected.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The call each registered function must accept: its name and its positional parameters.
SIGNATURES = {
    "factory": ("factory", ("settings",)),
    "make_batch": ("make_batch", ("batch_size", "settings", "device")),
    "loss": ("loss", ("model", "batch")),
    "items_per_sample": ("items_per_sample", ("settings",)),
}


def signature_text(role: str) -> str:
    """``make_batch(batch_size, settings, device)``: how ``role`` is called."""
    name, params = SIGNATURES[role]
    return f"{name}({', '.join(params)})"


def _describe(fn: Callable) -> str:
    """``my_batch(batch_size, device)``: a callable with the parameters it declares."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    try:
        return f"{name}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return name


def check_callable(who: str, role: str, fn: Any) -> None:
    """Raise unless ``fn`` can be called with the positional arguments ``role`` gets.

    The worker calls ``make_batch(batch_size, settings, device)``, ``loss(model, batch)``,
    ``factory(settings)`` and ``items_per_sample(settings)`` with positional arguments.  A
    callable whose signature cannot be read (some built-ins) is taken as it is.
    """
    expected = signature_text(role)
    if not callable(fn):
        raise ValueError(f"{who}: {role} must be a function called as {expected}, not "
                         f"{fn!r} ({type(fn).__name__})")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    count = len(SIGNATURES[role][1])
    try:
        signature.bind(*range(count))
    except TypeError:
        raise ValueError(f"{who}: {role} must take {count} positional parameter{'s' if count > 1 else ''}, "
                         f"{expected}; {_describe(fn)} does not") from None


def check_choice(who: str, field: str, value: Any, choices: Iterable[str]) -> None:
    """Raise unless ``value`` is one of ``choices``; the message lists them."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{who}: {field} must be one of {', '.join(choices)}, not {value!r}")


def check_mapping(who: str, field: str, value: Any, what: str) -> None:
    """Raise unless ``value`` is a mapping with string keys (``what``: what it maps, for the message)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{who}: {field} must be a mapping (a dict) of {what}, not {value!r} "
                         f"({type(value).__name__})")
    for key in value:
        if not isinstance(key, str):
            raise ValueError(f"{who}: {field} must be a mapping (a dict) of {what}; its key {key!r} "
                             f"is not a string")
