"""Code written outside a fence is shown and exported as code, its indentation kept (issue 65,
item 7): the detection, the first line's stripped indentation, and what stays prose."""

from __future__ import annotations

from pathlib import Path

from backend.chat.code_text import code_as_code, is_code, restore_first_indent
from backend.chat.conversation import Conversation
from backend.chat.export import chat_markdown, receipt_json
from backend.chat.store import ChatStore

DEMO_BODY = "if path:\n        return None\n    return path"
"""The demo model's reply to ``def f(path):`` as stored: a method body, its first line stripped."""


def test_an_unfenced_body_is_fenced_with_its_indentation() -> None:
    assert code_as_code(DEMO_BODY) == "```python\nif path:\n    return None\nreturn path\n```"
    whole = "def f(path):\n    if path:\n        return None\n    return path"
    assert code_as_code(whole) == f"```python\n{whole}\n```"


def test_the_first_lines_indentation_is_put_back_where_the_next_lines_say() -> None:
    assert restore_first_indent(DEMO_BODY.split("\n"))[0] == "    if path:", "it opens a block"
    assert restore_first_indent(["x = 1", "    y = 2"])[0] == "    x = 1", "it stands with the next"
    assert restore_first_indent(["def f():", "    pass"])[0] == "def f():", "its block is the next"
    assert restore_first_indent(["a", "b"]) == ["a", "b"]


def test_code_after_prose_keeps_its_blank_lines_and_the_prose_stays() -> None:
    text = "Some prose first.\n\ndef g(x):\n    y = x + 1\n\n    return y\n\nThat was it."
    assert code_as_code(text) == (
        "Some prose first.\n\n```python\ndef g(x):\n    y = x + 1\n\n    return y\n```\n\nThat was it."
    )


def test_prose_lists_and_fences_are_left_as_written() -> None:
    for text in (
        "Here is a list:\n  - one\n  - two\n\nAnd prose.",
        "Hello.\n\n```python\nprint('hi')\n    x = 1\n```",
        "Note\n    x = 1",
        "Plain text, one line.",
        "1. first\n   more about it\n2. second",
    ):
        assert code_as_code(text) == text
    assert not is_code(["Dear reader,", "  thank you."])


def test_other_languages_are_fenced_without_a_language() -> None:
    text = "int main() {\n    return 0;\n}"
    assert code_as_code(text) == f"```\n{text}\n```"


def test_a_huge_line_is_quick_and_left_alone() -> None:
    text = " " * 1_000_000 + "x = 1\n" + "(" * 200_000
    assert code_as_code(text) == text


def test_the_markdown_export_keeps_the_indentation_and_the_receipt_the_text(tmp_path: Path) -> None:
    conversation = Conversation(ChatStore(tmp_path / "history.db"))
    conversation.add_user("def f(path):")
    conversation.add_reply(DEMO_BODY, "optimized", None)
    assert "```python\nif path:\n    return None\nreturn path\n```" in chat_markdown(conversation)
    assert '"text": "if path:\\n        return None\\n    return path"' in receipt_json(conversation, {})
