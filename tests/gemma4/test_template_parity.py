"""The app's conversations through every published Gemma 4 template, and the project's own template
against the current one (tests/support/published_templates.py says where they come from).

Every conversation the app can hold (tests/support/conversation_corpus.py: tool steps, several calls,
text before calls, thoughts, media, system prompts, finished or waiting for the model) renders
without error through each revision, with each result under its own call's name and the model's
turn left open after results; the template ``make-model`` writes renders the same bytes as
google/gemma-4-E2B-it's current revision.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest

from backend.assets import ASSETS
from backend.checkpoints.tokenizer import chat_template
from backend.gemma4.messages import ChatMessage
from backend.gemma4.template_messages import template_messages
from backend.tools.builtins import ToolContext
from backend.tools.registry import ToolRegistry
from backend.tools.sandbox import Sandbox
from tests.support.conversation_corpus import corpus
from tests.support.published_templates import CURRENT, REVISIONS, published

CASES = corpus(seed=35, count=160)


@cache
def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ASSETS / "demo" / "model")


@cache
def _tools() -> list[dict[str, Any]]:
    registry = ToolRegistry.load(ToolContext(Sandbox.of([])), plugins=lambda: [])
    return registry.declarations()


def render(template: str, messages: list[ChatMessage], thinking: bool, tools: bool = True) -> str:
    return str(
        _tokenizer().apply_chat_template(
            template_messages(messages),
            tools=_tools() if tools else None,
            chat_template=template,
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=thinking,
        )
    )


def test_the_projects_template_writes_the_current_revisions_bytes() -> None:
    reference = published(CURRENT)
    ours = chat_template()
    assert (ASSETS / "demo" / "model" / "chat_template.jinja").read_text() == ours, "the demo has it too"
    differing = []
    for number, (messages, thinking) in enumerate(CASES):
        for tools in (True, False):
            if render(ours, messages, thinking, tools) != render(reference, messages, thinking, tools):
                differing.append(number)
    assert differing == [], f"conversations rendering differently: {differing[:10]}"


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_conversation_renders_through_every_revision(revision: str) -> None:
    template = published(revision)
    for messages, thinking in CASES:
        prompt = render(template, messages, thinking)
        _check_structure(prompt, messages, thinking, revision)


def _check_structure(prompt: str, messages: list[ChatMessage], thinking: bool, revision: str) -> None:
    calls = [c["function"]["name"] for m in messages for c in m.tool_calls]
    answered = [m.name for m in messages if m.role == "tool"]
    assert re.findall(r"<\|tool_call>call:([\w.]+)\{", prompt) == calls
    assert re.findall(r"<\|tool_response>response:([\w.]+)\{", prompt) == answered, "results by name"
    media = sum(len(m.media) for m in messages)
    placeholders = len(re.findall(r"<\|(?:image|audio|video)\|>", prompt))
    images_in_results = sum(1 for m in messages if m.role == "tool" and "images" in (m.data or {}))
    assert placeholders == media + images_in_results
    system = next((m.text.strip() for m in messages if m.role == "system"), None)
    if system:
        assert prompt.count(system) == 1
    if messages[-1].role == "tool":  # waiting for the model after results: its turn stays open
        opened = thinking and revision.endswith("07-09")
        assert prompt.endswith("<tool_response|><|channel>thought\n" if opened else "<tool_response|>")
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        assert "<turn|>" not in prompt[prompt.rindex("<|turn>user") :].split("<turn|>", 1)[1]
        assert messages[last_user].role == "user"
    elif revision.startswith("31b") and not thinking:  # the 31B template closes an empty thought
        assert prompt.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    else:
        assert prompt.endswith("<|turn>model\n")


def test_a_sentence_before_a_call_does_not_close_the_turn() -> None:
    step = ChatMessage(
        "assistant",
        "Let me compute that.",
        tool_calls=(
            {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "6*7"}}},
        ),
    )
    messages = [
        ChatMessage("user", "6*7?"),
        step,
        ChatMessage("tool", "", name="calculator", data={"result": 42}),
    ]
    for revision in REVISIONS:
        prompt = render(published(revision), messages, thinking=False)
        assert prompt.endswith("<|tool_response>response:calculator{result:42}<tool_response|>"), revision
    finished = [*messages, ChatMessage("assistant", "It is 42."), ChatMessage("user", "Thanks")]
    prompt = render(published(CURRENT), finished, thinking=False)
    assert "<tool_response|>Let me compute that.\n\nIt is 42.<turn|>\n<|turn>user\nThanks" in prompt


def test_earlier_thoughts_stay_out_and_this_turns_thoughts_stay_in() -> None:
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "1"}}}
    messages = [
        ChatMessage("user", "First?"),
        ChatMessage("assistant", "One.", thought="old thought"),
        ChatMessage("user", "Second?"),
        ChatMessage("assistant", "", tool_calls=(call,), thought="new thought"),
        ChatMessage("tool", "", name="calculator", data={"result": 1}),
    ]
    prompt = render(published(CURRENT), messages, thinking=True)
    assert "old thought" not in prompt
    assert "<|turn>model\n<|channel>thought\nnew thought\n<channel|><|tool_call>call:calculator" in prompt
