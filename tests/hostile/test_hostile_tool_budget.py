"""Hardening round 3 (issue 46, item 10): which part of a prompt that does not fit is named: the tool
declarations where they take more of the window than the reply budget, the reply budget where it
takes more (a ``--max-tokens 4000`` in a 4,096-token window was blamed on the declarations)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.chat.tool_budget import declarations_too_large
from backend.gemma4.messages import ChatMessage


@dataclass
class _Rendered:
    token_count: int


class _Renderer:
    """Renders to ``plain`` tokens without declarations."""

    def __init__(self, plain: int) -> None:
        self.plain = plain

    def render(self, messages: list[ChatMessage], tools: Any) -> _Rendered:
        return _Rendered(self.plain)


TOOLS = [{"type": "function", "function": {"name": f"t{n}"}} for n in range(5)]
MESSAGES = [ChatMessage("user", "hi")]


def test_a_reply_budget_larger_than_the_declarations_is_named() -> None:
    error = declarations_too_large(_Renderer(20), MESSAGES, TOOLS, 620, 0, 4000, 4096, "optimized")
    assert error is not None
    assert "reply budget (4000 tokens) is too large" in error.problem
    assert "to 3476 or less" in error.fix and "600 of them the declarations of 5 tools" in error.problem


def test_declarations_larger_than_the_reply_budget_are_named() -> None:
    error = declarations_too_large(_Renderer(20), MESSAGES, TOOLS, 4000, 0, 256, 4096, "optimized")
    assert error is not None and "tool declarations are too large" in error.problem


def test_a_prompt_too_long_without_declarations_is_not_theirs() -> None:
    assert declarations_too_large(_Renderer(4000), MESSAGES, TOOLS, 4500, 0, 256, 4096, "optimized") is None
