"""Reading and writing the plugin's JSON documents: schema-checked, atomic.

Every document (baseline, worker result, session results) has a JSON Schema shipped in
``pytest_dlperf/schemas`` and a ``schema_version``.  Reading one that is missing,
malformed or off-schema raises :class:`DocumentError` naming the file and the JSON path
of the problem.  Writing goes to a temporary file in the same folder, fsynced, then
renamed over the target: a crash mid-write leaves the old file as it was.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = ("baseline", "result", "results")


class DocumentError(ValueError):
    """A JSON document that cannot be used; the message names the file and the place."""

    def __init__(self, path: str | os.PathLike | None, where: str | None, message: str):
        self.path = str(path) if path is not None else None
        self.where = where
        self.problem = message
        prefix = self.path or "<document>"
        super().__init__(f"{prefix}: {where}: {message}" if where else f"{prefix}: {message}")


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


def validate(data: Any, name: str, path: str | os.PathLike | None = None) -> None:
    """Raise :class:`DocumentError` for the first schema violation (by JSON path order).

    A document of another kind (a results file given as a baseline) is named as such first:
    its other differences from the schema would only hide that.
    """
    expected_kind = schema(name).get("properties", {}).get("kind", {}).get("const")
    if isinstance(data, dict) and expected_kind and data.get("kind") != expected_kind:
        found = f"a {data['kind']!r} document" if isinstance(data.get("kind"), str) else "a document without a kind"
        raise DocumentError(path, "$.kind", f"expected kind {expected_kind!r} ({name} document), found {found}")
    errors = sorted(_validator(name).iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
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
    if error.validator == "const" and error.path and error.path[-1] == "schema_version":
        return (f"schema_version {error.instance!r} is not supported; this pytest-dlperf reads "
                f"version {error.validator_value}")
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


def load(path: str | os.PathLike, name: str, what: str | None = None) -> Any:
    """Read and validate the document ``path`` against schema ``name``."""
    what = what or name
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnreadableError(path, None, f"{what} file not found") from None
    except OSError as exc:
        raise UnreadableError(path, None, f"cannot read the {what} file: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(path, None, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    validate(data, name, path)
    return data


def dump(path: str | os.PathLike, data: Any, name: str | None = None) -> None:
    """Validate (when ``name`` is given) and write ``data`` to ``path`` atomically."""
    if name is not None:
        validate(data, name, path)
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")


def write_atomic(path: str | os.PathLike, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
