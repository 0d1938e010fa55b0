"""Reading and writing the plugin's JSON documents: schema-checked, atomic.

Every document (baseline, worker result, session results) has a JSON Schema shipped in
``pytest_dlperf/schemas`` and a ``schema_version``.  Reading one that is missing,
malformed or off-schema raises :class:`DocumentError` naming the file and the JSON path
of the problem, in one line.  The reader is strict where Python's ``json`` is lenient:
text that is not UTF-8, ``NaN`` and ``Infinity``, numbers too large for a float
(``1e400``), a field given twice in one object and nesting deeper than
:data:`MAX_DEPTH` are refused, each with the place it occurs.

Writing goes to a temporary file in the target's folder (the folder of the file a
symbolic link points to: the link stays), fsynced, then renamed over the target: a crash
mid-write leaves the old file as it was, and a failed write leaves no temporary file.  A
document is written only when the reader would take it back: it is serialized, read
back and validated before the rename.  Folders, devices (``/dev/null``), FIFOs and
sockets are refused as targets (:class:`OutputError`; :mod:`pytest_dlperf.atomic` writes).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from .atomic import OutputError, check_output, check_writable, write_atomic  # noqa: F401  (re-exported)

SCHEMAS = ("baseline", "bmf", "history-export", "result", "results")
MAX_DEPTH = 64  # levels of nested objects and arrays a document may have; ours have about 8
FINITE = "expected a finite number"
DEEP = f"nested deeper than {MAX_DEPTH} levels of objects and arrays; expected a flatter document"


def one_line(text: str | None) -> str | None:
    """``text`` with line breaks and other unprintable characters escaped, so a message stays one line (and a
    file's text, a baseline's ``source``, cannot move a terminal's cursor or recolour it: ``\\x1b``)."""
    if not text or text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


class DocumentError(ValueError):
    """A JSON document that cannot be used; the message, one line, names the file and the place."""

    def __init__(self, path: str | os.PathLike | None, where: str | None, message: str):
        self.path = str(path) if path is not None else None
        self.where = where
        self.problem = message
        prefix = self.path or "<document>"
        text = f"{prefix}: {where}: {message}" if where else f"{prefix}: {message}"
        super().__init__(one_line(text))


class UnreadableError(DocumentError):
    """A document that could not be read at all (missing, a folder, no permission), as opposed to
    one that was read and is malformed or off-schema."""


@functools.cache
def schema(name: str) -> dict[str, Any]:
    text = resources.files("pytest_dlperf").joinpath("schemas", f"{name}.schema.json").read_text()
    return json.loads(text)


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(name))


# --------------------------------------------------------------------------- strict parsing


class _Refused:
    """A value the reader refuses (``NaN``, ``1e400``), left in its place so that its JSON path can be named."""

    __slots__ = ("problem",)

    def __init__(self, problem: str):
        self.problem = problem


class _Object(dict):
    """An object that named a field twice: the first such field, so that its place can be named."""

    __slots__ = ("duplicate",)


def _parse_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not allowed; {FINITE} (JSON has no NaN or Infinity)")


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if math.isfinite(value):
        return value
    return _Refused(f"{_short(text)} is too large for a float (it reads as infinity); {FINITE}")


def _parse_int(text: str) -> int | _Refused:
    # A float holds up to about 1.8e308; int() refuses more than 4300 digits outright.
    if len(text.lstrip("-")) <= 308:
        return int(text)
    if len(text.lstrip("-")) <= 400:
        value = int(text)
        try:
            float(value)
            return value
        except OverflowError:
            pass
    return _Refused(f"{_short(text)} is too large for a float; {FINITE}")


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    marked = _Object(obj)
    for key, _ in pairs:
        if key in seen:
            marked.duplicate = key
            break
        seen.add(key)
    return marked


def _member(path: str, key: Any) -> str:
    """``path`` and one more step, spelled as jsonschema's ``json_path`` spells it."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    if re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_]*", key):
        return f"{path}.{key}"
    escaped = key.replace("\\", "\\\\").replace("'", "\\'")
    return f"{path}['{escaped}']"


def first_problem(data: Any) -> tuple[str | None, str] | None:
    """The first value of ``data`` (in document order) that no valid document has, as (JSON path,
    problem): a non-finite number, a field named twice, nesting deeper than :data:`MAX_DEPTH` (no
    path: it would be as long as the nesting is deep).

    Iterative, so any depth is safe.  None when there is none.
    """
    stack: list[tuple[Any, str, int]] = [(data, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, _Refused):
            return path, value.problem
        if isinstance(value, float) and not math.isfinite(value):
            return path, f"{value!r} is not allowed; {FINITE} (JSON has no NaN or Infinity)"
        if isinstance(value, dict | list | tuple):
            if depth >= MAX_DEPTH:
                return None, DEEP
            if isinstance(value, _Object):
                return _member(path, value.duplicate), "the field appears twice in its object; expected each field once"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((item, _member(path, key), depth + 1) for key, item in reversed(list(items)))
    return None


def parse(text: str, path: str | os.PathLike | None = None) -> Any:
    """The JSON document ``text`` (from ``path``, for messages), strictly: see the module's doc."""
    if text.startswith("\ufeff"):  # a byte-order mark, as some editors write: RFC 8259 lets a reader ignore it
        text = text[1:]
    if not text.strip():
        raise DocumentError(path, None, "the file is empty; expected a JSON document")
    try:
        data = json.loads(text, parse_constant=_parse_constant, parse_float=_parse_float, parse_int=_parse_int,
                          object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if exc.msg.startswith("Unterminated string"):
            problem = f"a string starting at {where} never ends (truncated?)"
        elif exc.pos >= len(text.rstrip()):
            problem = f"the document ends early at {where} (truncated?)"
        else:
            problem = f"{exc.msg} at {where}"
        raise DocumentError(path, None, f"not valid JSON: {problem}") from None
    except RecursionError:
        raise DocumentError(path, None, DEEP) from None
    problem = first_problem(data)
    if problem is not None:
        raise DocumentError(path, *problem)
    return data


# --------------------------------------------------------------------------- validation


def validate(data: Any, name: str, path: str | os.PathLike | None = None) -> None:
    """Raise :class:`DocumentError` for the first problem: a value JSON cannot hold (NaN, infinity,
    too deep), else the first schema violation (by JSON path order).

    A document of another kind (a results file given as a baseline) is named as such first:
    its other differences from the schema would only hide that.
    """
    problem = first_problem(data)
    if problem is not None:
        raise DocumentError(path, *problem)
    expected_kind = schema(name).get("properties", {}).get("kind", {}).get("const")
    if isinstance(data, dict) and expected_kind and data.get("kind") != expected_kind:
        found = f"a {data['kind']!r} document" if isinstance(data.get("kind"), str) else "a document without a kind"
        raise DocumentError(path, "$.kind", f"expected kind {expected_kind!r} ({name} document), found {found}")
    try:
        errors = sorted(_validator(name).iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except RecursionError:  # first_problem bounds the depth; this is a last guard
        raise DocumentError(path, None, "nested too deep to check; expected a flatter document") from None
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors)
    message = _describe(error)
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    raise DocumentError(path, error.json_path, message)


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        if extra and allowed:
            return f"unexpected field {', '.join(map(repr, extra))}; expected one of {', '.join(allowed)}"
    if error.validator == "required":
        return f"{error.message}"
    if error.validator in ("const", "enum") and error.path and error.path[-1] == "schema_version":
        if error.validator == "const" and error.schema.get("description"):  # a version the file's content needs (baseline: a convergence case)
            return f"schema_version {error.instance!r}: {error.schema['description']}"
        versions = error.validator_value if error.validator == "enum" else [error.validator_value]
        return (f"schema_version {error.instance!r} is not supported; this pytest-dlperf reads "
                f"version {' or '.join(map(str, versions))}")
    if error.validator in ("anyOf", "oneOf") and all(map(_alternative, error.validator_value)):
        expected = " or ".join(_alternative(sub) for sub in error.validator_value)
        return f"{error.instance!r} is not {expected}"
    return error.message


def _alternative(subschema: dict[str, Any]) -> str | None:
    """One branch of an ``anyOf`` in words (``an integer >= 1``, ``'max'``); None when it is not that simple."""
    if set(subschema) == {"const"}:
        return repr(subschema["const"])
    if subschema.get("type") == "integer" and set(subschema) <= {"type", "minimum"}:
        return "an integer" + (f" >= {subschema['minimum']}" if "minimum" in subschema else "")
    return None


# --------------------------------------------------------------------------- reading


def load(path: str | os.PathLike, name: str, what: str | None = None) -> Any:
    """Read and validate the document ``path`` against schema ``name``."""
    what = what or name
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise UnreadableError(path, None, f"{what} file not found") from None
    except OSError as exc:
        raise UnreadableError(path, None, f"cannot read the {what} file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DocumentError(path, None, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                                        f"(line {line}) cannot be decoded; expected a UTF-8 JSON document") from None
    data = parse(text, path)
    validate(data, name, path)
    return data


# --------------------------------------------------------------------------- writing


def dump(path: str | os.PathLike, data: Any, name: str | None = None,
         check: Callable[[Any], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically, as JSON the reader takes back.

    The text is read back as :func:`load` reads it and, when ``name`` is given, validated
    against that schema (and passed to ``check``, which may raise) before anything is
    renamed into place: an invalid document raises :class:`DocumentError` naming ``path``
    and the field, and the old file stays.  NaN and infinity are refused, naming the field.
    """
    check_output(path)
    problem = first_problem(data)
    if problem is not None:
        raise DocumentError(path, *problem)
    text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    document = parse(text, path)
    if name is not None:
        validate(document, name, path)
    if check is not None:
        check(document)
    write_atomic(path, text)
