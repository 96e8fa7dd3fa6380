"""Untrusted JSON (imported transcripts, probe scenarios): read safely, validate with pydantic.

A file goes through three steps, and the first failure raises an
``UntrustedJSONError`` subclass with a stable ``code``, the JSON ``path`` of the
offending value (``history[3].role``) and ``details`` for the message, so that
a page can show a translated message from the code alone:

1. ``parse_json``: size, encoding and JSON syntax, which pydantic never sees
   (duplicate keys, NaN, nesting).
2. ``check_header``: the format name and version, so that a file from a newer
   Memora says so instead of failing on its first new key.
3. ``validate``: a ``StrictModel`` (unknown keys, types, ranges, lengths). The
   first of pydantic's errors becomes one of this module's codes in ``_error_from``.

Unknown keys are errors: files are versioned, and a key this version does not
know is either a typo or a file from a newer version that this one would
silently misread.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

MAX_INT = 10**12
"""Larger than any token count or index a session can reach; bigger numbers are hostile or
corrupt."""


class UntrustedJSONError(ValueError):
    """A JSON document failed a check. ``code`` is stable, ``path`` locates the value.

    The message is plain English; ``details`` holds the figures it names, for
    translation (for example ``{"limit": 2097152, "size": 3000000}``).
    """

    def __init__(self, code: str, message: str, path: str = "", **details: Any) -> None:
        self.code = code
        self.path = path
        self.details = details
        super().__init__(f"{path}: {message}" if path else message)


class StrictModel(BaseModel):
    """No unknown keys, no type coercion (``"3"`` is no number, ``true`` no count), no NaN."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def not_blank(value: str) -> str:
    """``value`` unless it is only whitespace; then the error ``empty_string``."""
    if not value.strip():
        raise PydanticCustomError("empty_string", "must not be empty.")
    return value


NotBlank = AfterValidator(not_blank)
"""Marks a text that must not be empty or only whitespace: ``Annotated[str, Field(min_length=1),
NotBlank]``."""

Count = Annotated[int, Field(ge=0, le=MAX_INT)]
"""A token count or a total: a whole number, never negative, never absurd."""


def _decoded(raw: bytes | str, error: type[UntrustedJSONError], max_bytes: int) -> str:
    """``raw`` as text, once its size is known to be within ``max_bytes``; a UTF-8 BOM is
    dropped."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise error(
            "too_large",
            f"The file is {size:,} bytes; the limit is {max_bytes:,} bytes.",
            size=size,
            limit=max_bytes,
        )
    if not isinstance(raw, bytes):
        return raw.removeprefix("\ufeff")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as problem:
        raise error(
            "bad_encoding",
            f"The file is not UTF-8 text (byte {problem.start}).",
            position=problem.start,
        ) from None


def parse_json(raw: bytes | str, error: type[UntrustedJSONError], *, max_bytes: int) -> Any:
    """Parses untrusted JSON text after checking its size and encoding.

    The size is checked before anything is decoded. Bytes must be UTF-8 (a
    UTF-8 byte-order mark is allowed). NaN and Infinity, numbers that overflow a
    float, integers over 4300 digits, duplicate keys (which pydantic cannot see:
    the dict keeps the last one) and nesting deep enough to exhaust the parser
    are all rejected with ``error``. Lone surrogates parse; the model rejects them.
    """
    text = _decoded(raw, error, max_bytes)

    def no_constant(name: str) -> Any:
        raise error("bad_number", f"{name} is not allowed in this file.", value=name)

    def finite_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise error(
                "bad_number", f"The number {literal[:40]} is too large.", value=literal[:40]
            )
        return value

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise error(
                    "duplicate_key",
                    f"The key {key[:40]!r} appears twice in one object.",
                    key=key[:40],
                )
            result[key] = value
        return result

    try:
        return json.loads(
            text,
            parse_constant=no_constant,
            parse_float=finite_float,
            object_pairs_hook=unique_keys,
        )
    except UntrustedJSONError:
        raise
    except RecursionError:
        raise error("too_deep", "The file is nested too deeply.") from None
    except json.JSONDecodeError as problem:
        raise error(
            "not_json",
            f"The file is not valid JSON: {problem.msg} (line {problem.lineno}, column "
            f"{problem.colno}).",
            line=problem.lineno,
            column=problem.colno,
        ) from None
    except ValueError as problem:  # int() beyond Python's digit limit
        raise error(
            "bad_number", f"A number in the file cannot be read: {str(problem)[:80]}"
        ) from None


def check_header(
    data: Any, error: type[UntrustedJSONError], *, format: str, version: int, what: str
) -> dict[str, Any]:
    """``data`` as an object whose ``format`` is ``format`` and whose ``version`` is ``version``."""
    if not isinstance(data, dict):
        raise error(
            "wrong_type", f"{what} is a JSON object.", "", expected="object", found=_json_type(data)
        )
    if data.get("format") != format:
        raise error(
            "wrong_format",
            f"this is not {what} (format {str(data.get('format'))[:40]!r}).",
            "format",
        )
    found = data.get("version")
    if isinstance(found, bool) or not isinstance(found, int):
        raise error(
            "wrong_type",
            f"expected a whole number, found {_json_type(found)}.",
            "version",
            expected="integer",
            found=_json_type(found),
        )
    if not 0 <= found <= 10**6:
        raise error(
            "number_out_of_range",
            f"{_short(found)} is outside 0..{10**6}.",
            "version",
            value=_short(found),
            minimum=0,
            maximum=10**6,
        )
    if found != version:
        raise error(
            "unsupported_version",
            f"version {found} is not supported; this Memora reads version {version}.",
            "version",
            version=found,
            supported=version,
        )
    return data


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, error: type[UntrustedJSONError]) -> M:
    """``data`` validated as ``model``; the first failure is raised as ``error``."""
    try:
        return model.model_validate(data)
    except ValidationError as problem:
        raise _error_from(_first(problem.errors(include_url=False)), error) from None


def _first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The error a reader meets first: an object's unknown, then missing, keys come before any value
    inside it.

    pydantic lists errors field by field and unknown keys last; a file with a typo
    in a key would otherwise be reported as missing the key it meant.
    """
    first = errors[0]
    about_keys = [
        e
        for e in errors
        if e["type"] in ("extra_forbidden", "missing")
        and first["loc"][: len(e["loc"]) - 1] == e["loc"][:-1]
    ]
    return min(about_keys, key=lambda e: (len(e["loc"]), e["type"] == "missing"), default=first)


def json_path(loc: Sequence[int | str]) -> str:
    """pydantic's ``loc`` as the path a reader of the file knows: ``("history", 3, "role")`` is
    ``history[3].role``."""
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc
    ).removeprefix(".")


_EXPECTED = {
    "int_type": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "string_type": "text",
    "list_type": "list",
    "model_type": "object",
    "model_attributes_type": "object",
    "dict_type": "object",
}


def _error_from(e: ErrorDetails, error: type[UntrustedJSONError]) -> UntrustedJSONError:
    """One pydantic error as this module's code: its ``type`` picks the code, ``loc`` the path,
    ``ctx`` the details."""
    kind = e["type"]
    loc = e["loc"]
    ctx = e.get("ctx", {})
    value = e.get("input")
    path = json_path(loc)
    if kind == "missing":
        return error(
            "missing_key", f"the key {loc[-1]!r} is missing.", json_path(loc[:-1]), key=loc[-1]
        )
    if kind == "extra_forbidden":
        key = str(loc[-1])[:40]
        return error("unknown_key", f"unknown key {key!r}.", json_path(loc[:-1]), key=key)
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        found = _json_type(value)
        return error(
            "wrong_type",
            f"expected {expected}, found {found}.",
            path,
            expected=expected,
            found=found,
        )
    if (
        kind == "string_unicode"
    ):  # a lone surrogate escape (\ud800) parses but cannot be shown or saved again
        return error("bad_encoding", "contains an unpaired surrogate character.", path)
    if kind == "string_too_long":
        limit = ctx["max_length"]
        return error(
            "string_too_long",
            f"{len(value):,} characters; at most {limit:,} are allowed.",
            path,
            length=len(value),
            limit=limit,
        )
    if kind == "too_long":
        count = ctx["actual_length"]
        limit = ctx["max_length"]
        return error(
            "too_many_items",
            f"{count:,} items; at most {limit:,} are allowed.",
            path,
            count=count,
            limit=limit,
        )
    if kind in ("too_short", "string_too_short"):
        code = "empty_list" if kind == "too_short" else "empty_string"
        return error(code, "must not be empty.", path)
    if kind in ("greater_than_equal", "less_than_equal"):
        name, bound = ("minimum", ctx["ge"]) if "ge" in ctx else ("maximum", ctx["le"])
        side = "below" if name == "minimum" else "above"
        return error(
            "number_out_of_range",
            f"{_short(value)} is {side} the {name} {bound:,}.",
            path,
            value=_short(value),
            **{name: bound},
        )
    if kind == "literal_error":
        return error(
            "bad_role" if loc[-1] == "role" else "bad_value",
            f"{_short(value)} is not one of {ctx['expected']}.",
            path,
            value=_short(value),
            options=ctx["expected"],
        )
    if kind == "empty_string":  # raised by this module's own validators
        return error(kind, e["msg"], path)
    return error("bad_value", e["msg"], path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_JSON_TYPES = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "text",
    list: "list",
    dict: "object",
}


def _json_type(value: Any) -> str:
    """What ``json.loads`` made ``value`` from, in the words of the error messages."""
    return _JSON_TYPES.get(type(value), type(value).__name__)
