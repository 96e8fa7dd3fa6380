"""Strict checks for untrusted JSON (imported transcripts, probe scenarios).

Each check raises a ``StrictError`` subclass that carries a stable ``code``, the
JSON ``path`` of the offending value (``history[3].role``) and ``details`` for
the message, so that a page can show a translated message from the code alone.
Unknown keys are errors: files are versioned, and a key this version does not
know is either a typo or a file from a newer version that this one would
silently misread.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

MAX_INT = 10**12
"""Larger than any token count or index a session can reach; bigger numbers are hostile or corrupt."""


class StrictError(ValueError):
    """A JSON document failed a check. ``code`` is stable, ``path`` locates the value.

    The message is plain English; ``details`` holds the figures it names, for
    translation (for example ``{"limit": 2097152, "size": 3000000}``).
    """

    def __init__(self, code: str, message: str, path: str = "", **details: Any) -> None:
        self.code = code
        self.path = path
        self.details = details
        super().__init__(f"{path}: {message}" if path else message)


def parse_json(raw: bytes | str, error: type[StrictError], *, max_bytes: int) -> Any:
    """Parses untrusted JSON text after checking its size and encoding.

    The size is checked before anything is decoded. Bytes must be UTF-8 (a
    UTF-8 byte-order mark is allowed). NaN and Infinity, numbers that overflow a
    float, integers over 4300 digits, duplicate keys, lone surrogates and nesting
    deep enough to exhaust the parser are all rejected with ``error``.
    """
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise error("too_large", f"The file is {size:,} bytes; the limit is {max_bytes:,} bytes.", size=size, limit=max_bytes)
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as problem:
            raise error("bad_encoding", f"The file is not UTF-8 text (byte {problem.start}).", position=problem.start) from None
    else:
        text = raw.removeprefix("\ufeff")

    def no_constant(name: str) -> Any:
        raise error("bad_number", f"{name} is not allowed in this file.", value=name)

    def finite_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise error("bad_number", f"The number {literal[:40]} is too large.", value=literal[:40])
        return value

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise error("duplicate_key", f"The key {key[:40]!r} appears twice in one object.", key=key[:40])
            result[key] = value
        return result

    try:
        return json.loads(text, parse_constant=no_constant, parse_float=finite_float, object_pairs_hook=unique_keys)
    except StrictError:
        raise
    except RecursionError:
        raise error("too_deep", "The file is nested too deeply.") from None
    except json.JSONDecodeError as problem:
        raise error("not_json", f"The file is not valid JSON: {problem.msg} (line {problem.lineno}, column {problem.colno}).",
                    line=problem.lineno, column=problem.colno) from None
    except ValueError as problem:  # int() beyond Python's digit limit
        raise error("bad_number", f"A number in the file cannot be read: {str(problem)[:80]}") from None


def obj(value: Any, path: str, error: type[StrictError], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """``value`` as an object with every required key and no key outside required + optional."""
    if not isinstance(value, dict):
        raise error("wrong_type", f"expected an object, found {_json_type(value)}.", path, expected="object", found=_json_type(value))
    for key in value:
        if key not in required and key not in optional:
            raise error("unknown_key", f"unknown key {key[:40]!r}.", path, key=key[:40])
    for key in required:
        if key not in value:
            raise error("missing_key", f"the key {key!r} is missing.", path, key=key)
    return value


def array(value: Any, path: str, error: type[StrictError], max_items: int) -> list[Any]:
    if not isinstance(value, list):
        raise error("wrong_type", f"expected a list, found {_json_type(value)}.", path, expected="list", found=_json_type(value))
    if len(value) > max_items:
        raise error("too_many_items", f"{len(value):,} items; at most {max_items:,} are allowed.", path, count=len(value), limit=max_items)
    return value


def string(value: Any, path: str, error: type[StrictError], max_chars: int, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise error("wrong_type", f"expected text, found {_json_type(value)}.", path, expected="text", found=_json_type(value))
    if len(value) > max_chars:
        raise error("string_too_long", f"{len(value):,} characters; at most {max_chars:,} are allowed.", path, length=len(value), limit=max_chars)
    if not allow_empty and not value.strip():
        raise error("empty_string", "must not be empty.", path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate escape (\ud800) parses in Python but cannot be shown or saved again.
        raise error("bad_encoding", "contains an unpaired surrogate character.", path) from None
    return value


def integer(value: Any, path: str, error: type[StrictError], minimum: int = 0, maximum: int = MAX_INT) -> int:
    # bool is an int in Python, but true is no token count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise error("wrong_type", f"expected a whole number, found {_json_type(value)}.", path, expected="integer", found=_json_type(value))
    if not minimum <= value <= maximum:
        raise error("number_out_of_range", f"{_short(value)} is outside {minimum}..{maximum}.", path,
                    value=_short(value), minimum=minimum, maximum=maximum)
    return value


def optional_integer(value: Any, path: str, error: type[StrictError], minimum: int = 0, maximum: int = MAX_INT) -> int | None:
    return None if value is None else integer(value, path, error, minimum, maximum)


def number(value: Any, path: str, error: type[StrictError], minimum: float = 0.0, maximum: float = 1e9) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error("wrong_type", f"expected a number, found {_json_type(value)}.", path, expected="number", found=_json_type(value))
    if not (math.isfinite(value) and minimum <= value <= maximum):
        raise error("number_out_of_range", f"{_short(value)} is outside {minimum}..{maximum}.", path,
                    value=_short(value), minimum=minimum, maximum=maximum)
    return float(value)


def boolean(value: Any, path: str, error: type[StrictError]) -> bool:
    if not isinstance(value, bool):
        raise error("wrong_type", f"expected true or false, found {_json_type(value)}.", path, expected="boolean", found=_json_type(value))
    return value


def choice(value: Any, path: str, error: type[StrictError], options: tuple[str, ...], code: str = "bad_value") -> str:
    if not isinstance(value, str) or value not in options:
        shown = _short(value) if not isinstance(value, str) else repr(value[:40])
        raise error(code, f"{shown} is not one of {', '.join(options)}.", path, value=str(shown), options=list(options))
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
