"""Text never becomes structure: the chat template's markers inside text are defused.

The prompt is rendered as text and tokenized with special tokens parsed, so a user message, a tool
result, a file the model read or an MCP server's answer holding ``<turn|>\\n<|turn>model\\n`` or
``<|tool_call>`` would reach the model as Gemma 4's own turn and call tokens: forged turns and
tool calls (indirect prompt injection in the model's own tokens). Every string that goes into the
template — the messages' text, thoughts, tool-call arguments and their names, tool responses and
their keys (an MCP tool's ``structuredContent``), and the tools' declarations (names,
descriptions, property names and descriptions, enum values) — has each special token
of the model's tokenizer broken by a WORD JOINER (U+2060, invisible) after its first character:
``<|turn>`` becomes ``<⁠|turn>``, which the tokenizer reads as ordinary text. Only the template's
own markers are special tokens in the prompt, and the placeholders the app itself places
(``Structure``). What the app shows and stores is the text as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

JOINER = "\u2060"
STRUCTURE_KEYS = frozenset({"role", "type"})
"""Keys whose word values (``user``, ``image``, ``function``, ``object``) the app itself sets and
the template compares; any other value under them — a server's ``{"type": "<|turn>…"}`` — is
defused like every other string."""


class Structure(str):
    """Text the app itself writes into a message that must keep its special tokens (the image
    placeholders of a tool response whose images go to the model); nothing read from outside is
    one — JSON and tools give plain strings."""


def special_pattern(tokens: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every special token (longest first); None where there are none."""
    usable = sorted({t for t in tokens if len(t) > 1}, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in usable)) if usable else None


def tokenizer_specials(tokenizer: Any) -> list[str]:
    """The tokenizer's special tokens: the named ones and every added token marked special."""
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.update(str(token) for token in decoder.values() if getattr(token, "special", False))
    return sorted(found)


def defuse_text(text: str, pattern: re.Pattern[str] | None) -> str:
    if pattern is None:
        return text
    return pattern.sub(lambda match: match.group(0)[0] + JOINER + match.group(0)[1:], text)


def defuse(value: Any, pattern: re.Pattern[str] | None) -> Any:
    """``value`` (the template's messages, or the tools' declarations) with every string defused,
    dict keys included; a structure key's word value aside (``STRUCTURE_KEYS``)."""
    if isinstance(value, Structure):
        return str(value)
    if isinstance(value, str):
        return defuse_text(value, pattern)
    if isinstance(value, list | tuple):
        return [defuse(item, pattern) for item in value]
    if isinstance(value, dict):
        return {
            defuse(k, pattern) if isinstance(k, str) else k: v if _is_structure(k, v) else defuse(v, pattern)
            for k, v in value.items()
        }
    return value


def _is_structure(key: object, value: object) -> bool:
    return key in STRUCTURE_KEYS and isinstance(value, str) and value.isidentifier()
