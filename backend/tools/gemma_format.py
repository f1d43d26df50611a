"""Gemma 4's tool-call text: ``<|tool_call>call:NAME{key:value,…}<tool_call|>``.

Values are Gemma 4's compact format: bare keys, strings between ``<|"|>`` delimiters (so they
may hold commas, braces, quotes and newlines), bare numbers, ``true``/``false``/``null``,
nested ``{…}`` and ``[…]``. ``parse_output`` splits a decoded reply (special tokens kept)
into the text before the first call and the calls; a call that cannot be parsed becomes a
``ToolCall`` with ``error`` set, so the loop can tell the model what went wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from backend.tools.spec import ToolCall

CALL_OPEN = "<|tool_call>"
CALL_CLOSE = "<tool_call|>"
RESPONSE_OPEN = "<|tool_response>"
STRING_DELIM = '<|"|>'
_NAME = re.compile(r"call:([A-Za-z_][\w.\-]*)")
_BARE_END = re.compile(r"[,}\]]")
_INTEGER = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
MAX_DEPTH = 32
"""Objects and arrays nested deeper than this are refused (the parser recurses once per level)."""
MAX_DIGITS = 1000
"""Longer numbers are refused: Python would not even convert one of 4,300 digits from text."""


class MalformedCall(ValueError):
    pass


@dataclass(frozen=True)
class ParsedOutput:
    content: str
    """The reply's text outside tool calls (what the user should read)."""
    calls: tuple[ToolCall, ...]


def parse_output(text: str) -> ParsedOutput:
    """The calls in ``text`` (decoded with special tokens) and the text around them."""
    calls: list[ToolCall] = []
    content: list[str] = []
    position = 0
    while (start := text.find(CALL_OPEN, position)) != -1:
        content.append(text[position:start])
        end = _call_end(text, start + len(CALL_OPEN))
        body_end = end if end != -1 else len(text)
        raw = text[start : body_end + (len(CALL_CLOSE) if end != -1 else 0)]
        body = text[start + len(CALL_OPEN) : body_end]
        if end == -1:
            body = body.split(RESPONSE_OPEN)[0]
        calls.append(_call(body, raw, terminated=end != -1))
        position = len(text) if end == -1 else end + len(CALL_CLOSE)
    content.append(text[position:])
    return ParsedOutput(clean_text("".join(content)), tuple(calls))


def _call_end(text: str, i: int) -> int:
    """Where the call that starts at ``i`` closes (-1: it does not); a ``<tool_call|>`` inside a
    ``<|"|>`` string is text, not the end."""
    while True:
        close = text.find(CALL_CLOSE, i)
        quote = text.find(STRING_DELIM, i)
        if quote == -1 or close == -1 or close < quote:
            return close
        after = text.find(STRING_DELIM, quote + len(STRING_DELIM))
        if after == -1:  # a string never closed: end at the marker, the parser says what is wrong
            return close
        i = after + len(STRING_DELIM)


def clean_text(text: str) -> str:
    """Reply text without turn/tool markers (``<turn|>``, a trailing ``<|tool_response>``, …)."""
    for marker in ("<turn|>", RESPONSE_OPEN, "<eos>", "<|turn>model\n"):
        text = text.replace(marker, "")
    return text.strip()


def visible_text(text: str) -> str:
    """While streaming: the text so far with any (possibly unfinished) tool-call block hidden."""
    return parse_output(text).content if CALL_OPEN in text else clean_text(text)


def _call(body: str, raw: str, *, terminated: bool) -> ToolCall:
    match = _NAME.match(body.strip())
    if match is None:
        return ToolCall("", {}, raw, "the call has no `call:NAME` header")
    name = match.group(1)
    rest = body.strip()[match.end() :]
    if not terminated:
        return ToolCall(name, {}, raw, f"the call to {name} was cut off before {CALL_CLOSE}")
    try:
        value, end = _parse_value(rest, 0)
        if not isinstance(value, dict):
            raise MalformedCall("the arguments must be an object {…}")
        if rest[end:].strip():
            raise MalformedCall(f"unexpected text after the arguments: {rest[end:].strip()[:40]!r}")
    except MalformedCall as error:
        return ToolCall(name, {}, raw, f"the arguments of {name} could not be read: {error}")
    return ToolCall(name, value, raw)


def parse_arguments(text: str) -> dict[str, Any]:
    """``{key:value,…}`` in Gemma 4's format to a dict (raises ``MalformedCall``)."""
    value, end = _parse_value(text, 0)
    if not isinstance(value, dict) or text[end:].strip():
        raise MalformedCall("expected one object {…}")
    return value


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \n\t\r":
        i += 1
    return i


def _parse_value(text: str, i: int, depth: int = 0) -> tuple[Any, int]:
    i = _skip(text, i)
    if i >= len(text):
        raise MalformedCall("a value is missing")
    if text.startswith(STRING_DELIM, i):
        end = text.find(STRING_DELIM, i + len(STRING_DELIM))
        if end == -1:
            raise MalformedCall("a string is not closed")
        return text[i + len(STRING_DELIM) : end], end + len(STRING_DELIM)
    if text[i] in "{[" and depth >= MAX_DEPTH:
        raise MalformedCall(f"the arguments are nested more than {MAX_DEPTH} levels deep")
    if text[i] == "{":
        return _parse_object(text, i + 1, depth + 1)
    if text[i] == "[":
        return _parse_array(text, i + 1, depth + 1)
    match = _BARE_END.search(text, i)
    end = match.start() if match else len(text)
    return _bare(text[i:end].strip()), end


def _parse_object(text: str, i: int, depth: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    i = _skip(text, i)
    while True:
        if i >= len(text):
            raise MalformedCall("an object is not closed with }")
        if text[i] == "}":
            return result, i + 1
        colon = text.find(":", i)
        if colon == -1:
            raise MalformedCall("a key has no value")
        key = text[i:colon].strip()
        if key.startswith(STRING_DELIM) and key.endswith(STRING_DELIM):
            key = key[len(STRING_DELIM) : -len(STRING_DELIM)]
        if not key or any(c in key for c in "{}[],"):
            raise MalformedCall(f"bad key {key[:30]!r}")
        result[key], i = _parse_value(text, colon + 1, depth)
        i = _after_item(text, i, "}")


def _parse_array(text: str, i: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    i = _skip(text, i)
    while True:
        if i >= len(text):
            raise MalformedCall("an array is not closed with ]")
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


def _bare(token: str) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token == "null":
        return None
    if not token:
        raise MalformedCall("a value is empty")
    if any(c in token for c in ' \n\t:{[<"'):
        raise MalformedCall(f'{token[:30]!r} is not a value (strings go between <|"|> delimiters)')
    if _FLOAT.fullmatch(token):
        digits = sum(c.isdigit() for c in token)
        if digits > MAX_DIGITS:
            raise MalformedCall(f"a number of {digits} digits is too long (at most {MAX_DIGITS})")
        number = int(token) if _INTEGER.fullmatch(token) else float(token)
        if isinstance(number, float) and not math.isfinite(number):
            raise MalformedCall(f"{token[:30]} is out of range")
        return number
    return token  # an unquoted word: kept as text, the schema decides whether it is acceptable


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


def format_call(name: str, arguments: dict[str, Any]) -> str:
    return f"{CALL_OPEN}call:{name}{format_value(arguments)}{CALL_CLOSE}"


class VisibleStream:
    """Turns a reply's deltas into the text a reader should see: tool-call blocks and turn markers
    never appear, even while they stream. ``next_step()`` starts a new model step (after tools)."""

    def __init__(self) -> None:
        self._raw = ""
        self._shown = ""
        self._steps_shown = False

    def feed(self, delta: str) -> str:
        self._raw += delta
        visible = visible_text(self._raw)
        if not visible.startswith(self._shown) or len(visible) == len(self._shown):
            return ""
        new = visible[len(self._shown) :]
        if not self._shown and self._steps_shown:
            new = "\n\n" + new
        self._shown = visible
        return new

    def next_step(self) -> None:
        self._steps_shown = self._steps_shown or bool(self._shown)
        self._raw, self._shown = "", ""
