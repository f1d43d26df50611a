"""Gemma 4's compact value format: ``{key:value,…}`` with strings between ``<|"|>`` delimiters.

Bare keys, strings between ``<|"|>`` (so they may hold commas, braces, quotes and newlines),
bare numbers, ``true``/``false``/``null``, nested ``{…}`` and ``[…]``. ``parse_written`` keeps
what the model wrote: a value written without delimiters comes back as ``Bare`` (a ``str``),
so the tool's JSON schema can decide its type later (``backend.gemma4.schema_values``);
``by_look`` types such a value by its look (``42`` → 42, ``true`` → True), for where no schema
says otherwise.
"""

from __future__ import annotations

import math
import re
from typing import Any

STRING_DELIM = '<|"|>'
MAX_DEPTH = 32
"""Objects and arrays nested deeper than this are refused (the parser recurses once per level)."""
MAX_DIGITS = 1000
"""Longer numbers are refused: Python would not even convert one of 4,300 digits from text."""
_BARE_END = re.compile(r"[,}\])]")
_INTEGER = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")


class MalformedCall(ValueError):
    pass


class CutShort(MalformedCall):
    """The text ends inside the arguments (a string, object or array not closed, a value missing)."""


class Bare(str):
    """A value the model wrote without ``<|"|>`` delimiters (a number, a boolean, ``null`` or a word)."""

    __slots__ = ()


def parse_written(text: str, closer: str = "}") -> dict[str, Any]:
    """``{key:value,…}`` (or ``(key:value,…)`` with ``closer=")"``) as written: strings as ``str``,
    unquoted values as ``Bare``. Raises ``MalformedCall``."""
    i = _skip(text, 0)
    opener = "(" if closer == ")" else "{"
    if not text.startswith(opener, i):
        raise MalformedCall(f"the arguments must be an object {opener}…{closer}")
    value, end = _parse_object(text, i + 1, 1, closer)
    if text[end:].strip():
        raise MalformedCall(f"unexpected text after the arguments: {text[end:].strip()[:40]!r}")
    return value


def parse_arguments(text: str) -> dict[str, Any]:
    """``{key:value,…}`` in Gemma 4's format to a dict typed by look (raises ``MalformedCall``)."""
    value = by_look(parse_written(text))
    return value if isinstance(value, dict) else {}


def by_look(value: Any) -> Any:
    """``value`` with every ``Bare`` typed by its look: numbers, booleans, null, else the word."""
    if isinstance(value, Bare):
        return _bare(value)
    if isinstance(value, dict):
        return {key: by_look(item) for key, item in value.items()}
    if isinstance(value, list):
        return [by_look(item) for item in value]
    return value


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \n\t\r":
        i += 1
    return i


def _parse_value(text: str, i: int, depth: int) -> tuple[Any, int]:
    i = _skip(text, i)
    if i >= len(text):
        raise CutShort("a value is missing")
    if text.startswith(STRING_DELIM, i):
        end = text.find(STRING_DELIM, i + len(STRING_DELIM))
        if end == -1:
            raise CutShort("a string is not closed")
        return text[i + len(STRING_DELIM) : end], end + len(STRING_DELIM)
    if text[i] in "{[" and depth >= MAX_DEPTH:
        raise MalformedCall(f"the arguments are nested more than {MAX_DEPTH} levels deep")
    if text[i] == "{":
        return _parse_object(text, i + 1, depth + 1, "}")
    if text[i] == "[":
        return _parse_array(text, i + 1, depth + 1)
    match = _BARE_END.search(text, i)
    end = match.start() if match else len(text)
    token = text[i:end].strip()
    _check_bare(token)
    return Bare(token), end


def _parse_object(text: str, i: int, depth: int, closer: str) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    i = _skip(text, i)
    while True:
        if i >= len(text):
            raise CutShort(f"an object is not closed with {closer}")
        if text[i] == closer:
            return result, i + 1
        colon = text.find(":", i)
        if colon == -1:
            raise (MalformedCall if closer in text[i:] else CutShort)("a key has no value")
        key = text[i:colon].strip()
        if key.startswith(STRING_DELIM) and key.endswith(STRING_DELIM) and len(key) > 2 * len(STRING_DELIM):
            key = key[len(STRING_DELIM) : -len(STRING_DELIM)]
        if not key or any(c in key for c in "{}[](),"):
            raise MalformedCall(f"bad key {key[:30]!r}")
        result[key], i = _parse_value(text, colon + 1, depth)
        i = _after_item(text, i, closer)


def _parse_array(text: str, i: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    i = _skip(text, i)
    while True:
        if i >= len(text):
            raise CutShort("an array is not closed with ]")
        if text[i] == "]":
            return items, i + 1
        item, i = _parse_value(text, i, depth)
        items.append(item)
        i = _after_item(text, i, "]")


def _after_item(text: str, i: int, closer: str) -> int:
    i = _skip(text, i)
    if i < len(text) and text[i] == ",":
        return _skip(text, i + 1)
    if i < len(text) and text[i] != closer:
        raise MalformedCall(f"expected ',' or {closer!r} but found {text[i : i + 20]!r}")
    return i


def _check_bare(token: str) -> None:
    if not token:
        raise MalformedCall("a value is empty")
    if any(c in token for c in ' \n\t:{[<"'):
        raise MalformedCall(f'{token[:30]!r} is not a value (strings go between <|"|> delimiters)')
    if not _FLOAT.fullmatch(token):
        return
    digits = sum(c.isdigit() for c in token)
    if digits > MAX_DIGITS:
        raise MalformedCall(f"a number of {digits} digits is too long (at most {MAX_DIGITS})")
    if bare_number(token) is None:
        raise MalformedCall(f"{token[:30]} is out of range")


def _bare(token: str) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token == "null":
        return None
    number = bare_number(token)
    return str(token) if number is None else number


def bare_number(token: str) -> int | float | None:
    """``token`` as a number, if it is one (finite, not too long); else None."""
    if not _FLOAT.fullmatch(token) or sum(c.isdigit() for c in token) > MAX_DIGITS:
        return None
    number = int(token) if _INTEGER.fullmatch(token) else float(token)
    if isinstance(number, float) and not math.isfinite(number):
        return None
    return number


def format_value(value: Any) -> str:
    """A Python value in Gemma 4's format (as the chat template writes it), for previews and tests."""
    if isinstance(value, str):
        return f"{STRING_DELIM}{value}{STRING_DELIM}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)
