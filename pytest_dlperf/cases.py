"""Cases: one model x precision x per-device batch size x GPU count (+ settings).

A :class:`Case` is what becomes one pytest item.  Its id reads like
``resnet50-amp-bs256-gpu8``; settings given explicitly (not the model's defaults) are
appended, e.g. ``bert-base-amp-bs64-gpu1-seq512``.  A batch size of ``"max"`` (the largest
per-device batch that fits, found when the case runs: :mod:`pytest_dlperf.controller.batchsearch`)
reads ``bsmax``, so the id stays the same whatever batch the search chooses.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
MAX_BATCH = "max"  # batch_size of a case whose per-device batch is searched for
#: Most short trial runs of one ``batch_size: "max"`` search (``dlperf_max_batch_trials``).
MAX_BATCH_TRIALS = 12
DATA_BACKENDS = ("synthetic", "torchvision", "dali")
#: torch.compile's modes (``compile_mode``, with ``compile=true``); reduce-overhead replays CUDA graphs.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# Settings every model accepts, besides its own defaults (``image_size``, ``seq_len``, ...).
COMMON_SETTINGS = {
    "data": f"one of {', '.join(DATA_BACKENDS)}",
    "channels_last": "true or false",
    "compile": "true or false",
    "compile_mode": f"one of {', '.join(COMPILE_MODES)} (with compile=true)",
}


def compile_label(settings: Mapping[str, Any]) -> str:
    """How a step trained, as results and baseline entries say it: "eager", or the compile mode ("default", ...)."""
    return (settings.get("compile_mode") or "default") if settings.get("compile") else "eager"


# How known settings read in a test id; other settings read as key=value.
_ID_FORMATS = {
    "image_size": lambda v: f"img{v}",
    "seq_len": lambda v: f"seq{v}",
    "data": lambda v: str(v),
    "channels_last": lambda v: "nhwc" if v else "nchw",
    "compile": lambda v: "compile" if v else "eager",
    "compile_mode": lambda v: str(v),
}


@dataclasses.dataclass(frozen=True, order=True)
class Case:
    model: str
    precision: str
    batch_size: int | str  # per device; MAX_BATCH ("max"): searched for when the case runs
    gpus: int = 1
    settings: tuple[tuple[str, Any], ...] = ()
    # A convergence case (pytest_dlperf.convergence): its target ("metric", "value") and the
    # recipe's overrides ("lr", "warmup_epochs", "eval_every"); empty for a throughput case.
    target: tuple[tuple[str, Any], ...] = ()
    recipe: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, model: str, precision: str, batch_size: int | str, gpus: int = 1,
             settings: Mapping[str, Any] | None = None, target: Mapping[str, Any] | None = None,
             recipe: Mapping[str, Any] | None = None) -> Case:
        batch = MAX_BATCH if batch_size == MAX_BATCH else int(batch_size)
        return cls(model, precision, batch, int(gpus), tuple(sorted((settings or {}).items())),
                   tuple(sorted((target or {}).items())), tuple(sorted((recipe or {}).items())))

    @property
    def converges(self) -> bool:
        """Whether this is a convergence case: it trains to a target rather than timing windows."""
        return bool(self.target)

    @property
    def searches_batch(self) -> bool:
        """Whether the per-device batch is ``"max"``: the largest that fits, found by a search."""
        return self.batch_size == MAX_BATCH

    def with_batch(self, batch_size: int) -> Case:
        """The same case at a concrete per-device batch (what a ``"max"`` case measures)."""
        return dataclasses.replace(self, batch_size=int(batch_size))

    @property
    def id(self) -> str:
        return "-".join([self.model, self.precision, f"bs{self.batch_size}", f"gpu{self.gpus}",
                         *self.settings_parts, *self.target_parts])

    @property
    def target_parts(self) -> list[str]:
        """A convergence case's target and recipe overrides as they read in the id: ``top1-0.9``, ``lr=100``."""
        if not self.target:
            return []
        target = dict(self.target)
        return [f"{target['metric']}-{target['value']:g}", *(f"{k}={v:g}" for k, v in self.recipe)]

    @property
    def settings_parts(self) -> list[str]:
        """The explicit settings as they read in the id: ``img160``, ``seq512``, ``key=value``."""
        parts = []
        for key, value in self.settings:
            fmt = _ID_FORMATS.get(key)
            parts.append(fmt(value) if fmt else f"{key}={value}")
        return parts

    def without_defaults(self, defaults: Mapping[str, Any]) -> Case:
        """The same case without the settings that equal the model's defaults.

        ``bert-base`` with ``seq_len: 128`` is ``bert-base`` (its default is 128): one id, one
        case, whether a baseline spells the default out or not.
        """
        kept = {k: v for k, v in self.settings if not (k in defaults and defaults[k] == v)}
        return dataclasses.replace(self, settings=tuple(sorted(kept.items())))

    def with_gpus(self, gpus: int) -> Case:
        """The same config on ``gpus`` GPUs (the 1-GPU reference of a scaling case)."""
        return dataclasses.replace(self, gpus=gpus)

    @property
    def settings_dict(self) -> dict[str, Any]:
        return dict(self.settings)

    @property
    def markers(self) -> list[str]:
        return ["dlperf", f"gpu{self.gpus}", self.precision, self.model] + (["convergence"] if self.target else [])

    def to_dict(self) -> dict[str, Any]:
        out = {
            "model": self.model,
            "precision": self.precision,
            "batch_size": self.batch_size,
            "gpus": self.gpus,
            "settings": self.settings_dict,
        }
        if self.target:
            out["target"] = dict(self.target)
            if self.recipe:
                out["recipe"] = dict(self.recipe)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Case:
        return cls.make(data["model"], data["precision"], data["batch_size"],
                        data.get("gpus", 1), data.get("settings") or {}, data.get("target"), data.get("recipe"))

    def same_config(self, other: Case) -> bool:
        """Same model, precision, per-device batch, settings and target: differs at most in GPU count."""
        return (self.model, self.precision, self.batch_size, self.settings, self.target, self.recipe) == (
            other.model, other.precision, other.batch_size, other.settings, other.target, other.recipe)


class OptionError(ValueError):
    """An option value that cannot be used; the message names the option."""


# What each matrix option lists, for the message when it lists nothing.
_LISTS = {
    "--dlperf-model": "model names",
    "--dlperf-precision": f"precisions ({', '.join(PRECISIONS)})",
    "--dlperf-batch-size": f"batch sizes (integers >= 1 or {MAX_BATCH!r})",
    "--dlperf-gpus": "GPU counts (integers >= 1)",
    "--dlperf-set": "KEY=VALUE settings",
}


def _unique(values: Iterable[Any]) -> list[Any]:
    """``values`` without repeats, in first-seen order: ``tiny,tiny`` is one model, so one case."""
    out: list[Any] = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def parse_list(option: str, raw: str | Iterable[str] | None) -> list[str]:
    """Split comma lists; accepts one string or several (an option given twice, ini lines).

    ``None`` (the option not given) is the empty list.  A value given but empty (``''``, ``','``,
    ``a,,b``, ``a,``) is an :class:`OptionError`: it would silently collect nothing, or less than
    was asked for.  Repeated items are dropped, keeping the first-seen order.
    """
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else list(raw)
    what = _LISTS.get(option, "values")
    out: list[str] = []
    for item in items:
        item = str(item)
        fields = [field.strip() for field in item.split(",")]
        if not any(fields):
            raise OptionError(f"{option}: expected one or more {what}, got {item!r}")
        if not all(fields):
            raise OptionError(f"{option}: {item!r} has an empty item; expected {what} separated by commas")
        for field in fields:
            out.extend(part for part in re.split(r"\s+", field) if part)
    if not out:
        raise OptionError(f"{option}: expected one or more {what}")
    return _unique(out)


def parse_ints(option: str, raw, *, minimum: int = 1) -> list[int]:
    values = []
    for item in parse_list(option, raw):
        try:
            value = int(item)
        except ValueError:
            raise OptionError(f"{option}: {item!r} is not an integer") from None
        if value < minimum:
            raise OptionError(f"{option}: {value} is not allowed; expected an integer >= {minimum}")
        values.append(value)
    return _unique(values)


def parse_batch_sizes(option: str, raw) -> list[int | str]:
    """Per-device batch sizes: integers >= 1, or ``max`` (the largest that fits)."""
    values: list[int | str] = []
    for item in parse_list(option, raw):
        if item.lower() == MAX_BATCH:
            values.append(MAX_BATCH)
            continue
        try:
            value = int(item)
        except ValueError:
            raise OptionError(f"{option}: {item!r} is not an integer or {MAX_BATCH!r}") from None
        if value < 1:
            raise OptionError(f"{option}: {value} is not allowed; expected an integer >= 1 or {MAX_BATCH!r}")
        values.append(value)
    return values


def parse_precisions(option: str, raw) -> list[str]:
    values = parse_list(option, raw)
    for value in values:
        if value not in PRECISIONS:
            raise OptionError(
                f"{option}: unknown precision {value!r}; expected one of {', '.join(PRECISIONS)}"
            )
    return values


def parse_settings(option: str, raw) -> dict[str, Any]:
    """``KEY=VALUE`` items (``--dlperf-set seq_len=512``); a value reads as JSON when it can.

    ``seq_len=512`` is the integer 512, ``compile=true`` the boolean, ``data=dali`` the string.
    A number must be finite: ``1e400`` (infinity as a float), ``NaN`` and ``Infinity`` are refused.
    """
    out: dict[str, Any] = {}
    for item in parse_list(option, raw):
        key, sep, text = item.partition("=")
        if not sep or not key or not text:
            raise OptionError(f"{option}: {item!r} is not KEY=VALUE")
        try:
            value = json.loads(text, parse_constant=_not_finite(option, item), parse_int=_finite_int(option, item))
        except RecursionError:
            raise OptionError(f"{option}: {item!r}: the value must be a string, a number or true/false") from None
        except ValueError as exc:
            if isinstance(exc, OptionError):
                raise
            value = text
        if isinstance(value, float) and not math.isfinite(value):
            _not_finite(option, item)(text)
        if not isinstance(value, str | int | float | bool):
            raise OptionError(f"{option}: {item!r}: the value must be a string, a number or true/false")
        out[key] = value
    return out


def _not_finite(option: str, item: str):
    def refuse(text: str):
        raise OptionError(f"{option}: {item!r}: {text} is not a finite number; expected a finite number")
    return refuse


def _finite_int(option: str, item: str):
    def read(text: str) -> int:
        try:
            value = int(text)
            float(value)
        except (ValueError, OverflowError):
            shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"
            raise OptionError(f"{option}: {item!r}: {shown} is too large for a float; expected a finite number") \
                from None
        return value
    return read


def check_settings(settings: Mapping[str, Any], model_defaults: Mapping[str, Any], where: str) -> None:
    """Raise ``ValueError`` naming ``where`` for a setting the model does not know or a bad value.

    A model knows its own defaults' keys and :data:`COMMON_SETTINGS`.
    """
    for key, value in settings.items():
        if key not in model_defaults and key not in COMMON_SETTINGS:
            known = sorted(set(model_defaults) | set(COMMON_SETTINGS))
            raise ValueError(f"{where}.{key}: unknown setting {key!r}; this model takes {', '.join(known)}")
        if key == "data" and value not in DATA_BACKENDS:
            raise ValueError(f"{where}.data: {value!r} is not one of {', '.join(DATA_BACKENDS)}")
        if key in ("channels_last", "compile") and not isinstance(value, bool):
            raise ValueError(f"{where}.{key}: {value!r} is not true or false")
        if key == "compile_mode" and value not in COMPILE_MODES:
            raise ValueError(f"{where}.compile_mode: {value!r} is not one of {', '.join(COMPILE_MODES)}")
        if key == "compile_mode" and settings.get("compile") is not True:
            raise ValueError(f"{where}.compile_mode: {value!r} needs compile=true too")
        if key in model_defaults:
            check_setting_value(key, value, model_defaults[key], where)


def check_setting_value(key: str, value: Any, default: Any, where: str) -> None:
    """A setting's value is of its default's type: an integer for an integer setting (a positive one
    where the default is positive: sizes, counts), a number, true or false, or text as its default."""
    if default is None or value is None:
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{where}.{key}: {value!r} is not true or false")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}.{key}: {value!r} is not an integer; expected one like the default {default}")
        if default > 0 and value <= 0:
            raise ValueError(f"{where}.{key}: {value} is not allowed; expected a positive integer "
                             f"(the default is {default})")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}.{key}: {value!r} is not a number; expected one like the default {default}")
        if default > 0 and value <= 0:
            raise ValueError(f"{where}.{key}: {value} is not allowed; expected a positive number")
    elif isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: {value!r} is not text; expected text like the default {default!r}")


def matrix(models: list[str], precisions: list[str], batch_sizes: list[int | str],
           gpus: list[int], default_batch_size, settings: Mapping[str, Any] | None = None) -> list[Case]:
    """The cross product of the matrix options; missing axes take their defaults.

    No model, no cases.  A case comes once, however often its values are listed.  Precision
    defaults to fp32, GPU count to 1, batch size to the model's own default
    (``default_batch_size(model)``).
    """
    cases: list[Case] = []
    for model in models:
        for precision in precisions or ["fp32"]:
            for batch in batch_sizes or [default_batch_size(model)]:
                for n in gpus or [1]:
                    case = Case.make(model, precision, batch, n, settings)
                    if case not in cases:  # a value listed twice (max,MAX) makes one case, not two
                        cases.append(case)
    return cases
