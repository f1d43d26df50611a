"""Gemma 4's tool-call text: ``<|tool_call>call:NAME{key:value,…}<tool_call|>``.

``parse_output`` splits a decoded reply (special tokens kept; thinking already taken out by
``backend.gemma4.reply``) into the text outside the calls and the calls. It reads what vLLM 0.32's
Gemma 4 parser reads: the ``call`` word may be missing (``<|tool_call>:NAME{…}``), the
arguments may be in parentheses (``call:NAME(…)``), and a call the model closed with its
end-of-turn token instead of ``<tool_call|>`` counts when it is whole — the stop token never
reaches the text, so a reply the model ended itself (``complete``) may end in an open call. A
call that cannot be read becomes a ``ToolCall`` with ``error`` set, so the loop can tell the
model what went wrong. Values are read by ``backend.gemma4.call_values``: typed by their look
here, by the tool's schema when the call runs (``ToolCall.written`` keeps what was written).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from backend.gemma4.call_values import (
    STRING_DELIM,
    CutShort,
    MalformedCall,
    by_look,
    format_value,
    parse_written,
)
from backend.gemma4.tool_call import ToolCall

__all__ = ["CALL_CLOSE", "CALL_OPEN", "MalformedCall", "ParsedOutput", "format_call", "parse_output"]

CALL_OPEN = "<|tool_call>"
CALL_CLOSE = "<tool_call|>"
RESPONSE_OPEN = "<|tool_response>"
TURN_END = "<turn|>"
_NAME = re.compile(r"(?:call)?:([A-Za-z_][\w.\-]*)")


@dataclass(frozen=True)
class ParsedOutput:
    content: str
    """The reply's text outside tool calls (what the user should read)."""
    calls: tuple[ToolCall, ...]


def parse_output(text: str, *, complete: bool = False) -> ParsedOutput:
    """The calls in ``text`` (decoded with special tokens) and the text around them. ``complete``:
    the model ended the reply itself (a stop token; not the length limit, not the user)."""
    calls: list[ToolCall] = []
    content: list[str] = []
    position = 0
    while (start := text.find(CALL_OPEN, position)) != -1:
        content.append(text[position:start])
        end = _call_end(text, start + len(CALL_OPEN))
        if end == -1:  # no <tool_call|>: the call runs to a turn marker or the end of the text
            body = text[start + len(CALL_OPEN) :]
            cut = min((i for i in (body.find(RESPONSE_OPEN), body.find(TURN_END)) if i != -1), default=-1)
            body = body if cut == -1 else body[:cut]
            calls.append(_call(body, CALL_OPEN + body, closed=False, complete=complete))
            position = len(text)
            break
        body = text[start + len(CALL_OPEN) : end]
        calls.append(_call(body, text[start : end + len(CALL_CLOSE)], closed=True, complete=complete))
        position = end + len(CALL_CLOSE)
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
    for marker in (TURN_END, RESPONSE_OPEN, "<eos>", "<|turn>model\n"):
        text = text.replace(marker, "")
    return text.strip()


def _call(body: str, raw: str, *, closed: bool, complete: bool) -> ToolCall:
    match = _NAME.match(body.strip())
    if match is None:
        return ToolCall("", {}, raw, "the call has no `call:NAME` header")
    name = match.group(1)
    rest = body.strip()[match.end() :]
    cut_off = ToolCall(name, {}, raw, f"the call to {name} was cut off before {CALL_CLOSE}")
    if not closed and not complete:
        return cut_off
    try:
        written = parse_written(rest, ")" if rest.startswith("(") else "}")
    except MalformedCall as error:
        if not closed and isinstance(error, CutShort):  # the text ends inside it; whole but wrong: say why
            return cut_off
        return ToolCall(name, {}, raw, f"the arguments of {name} could not be read: {error}")
    return ToolCall(name, by_look(written), raw, written=written)


def format_call(name: str, arguments: dict[str, Any]) -> str:
    """A call as the chat template writes it (for tests and previews)."""
    return f"{CALL_OPEN}call:{name}{format_value(arguments)}{CALL_CLOSE}"
