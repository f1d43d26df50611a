"""Conversations the app can hold, generated from a seed, as the chat and the tool loop build them.

Each is a list of ``ChatMessage``: an optional system prompt, turns with media, replies with and
without thoughts, tool turns of one to three steps with one to three calls each (text before the
calls or not, results as the runner makes them, an image placeholder in a result), and either a
finished last turn or one that is waiting for the model after tool results.
"""

from __future__ import annotations

import random
from typing import Any

from backend.gemma4.messages import IMAGE_PLACEHOLDER, ChatMessage, MediaKind

TOOL_NAMES = ("calculator", "current_time", "read_file", "search_history", "weather.lookup", "git.log")
WORDS = ("alpha", "Tokyo, JP", 'say "hi"', "a{b}[c]", "line one\nline two", "東京 🚀", "  padded  ", "x:y,z")


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return rng.choice(WORDS)
    if kind == 1:
        return rng.randint(-1000, 100000)
    if kind == 2:
        return round(rng.uniform(-100, 100), rng.randint(0, 4))
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return None
    if kind in (5, 6):
        return {f"k{i}": value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def arguments(rng: random.Random) -> dict[str, Any]:
    return {rng.choice(("expression", "path", "query", "n", "flags", "options")) + str(i): value(rng)
            for i in range(rng.randint(0, 3))}  # fmt: skip


def tool_step(rng: random.Random, thinking: bool) -> list[ChatMessage]:
    calls = [(rng.choice(TOOL_NAMES), arguments(rng)) for _ in range(rng.randint(1, 3))]
    before = rng.choice(("", "", "Let me check that.", "One moment —"))
    thought = "I need a tool for this." if thinking and rng.random() < 0.6 else ""
    step = [
        ChatMessage(
            "assistant",
            before,
            tool_calls=tuple({"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls),
            thought=thought,
        )
    ]
    for name, _ in calls:
        data: dict[str, Any] = rng.choice(
            (
                {"result": value(rng)},
                {"error": "the file does not exist"},
                {"result": {"content": "Zebra crossing at 9", "lines": 1}},
                {"result": "an image", "images": IMAGE_PLACEHOLDER},
            )
        )
        step.append(ChatMessage("tool", "", name=name, data=data))
    return step


def user(rng: random.Random) -> ChatMessage:
    media: tuple[MediaKind, ...] = tuple(
        rng.choice(("image", "audio", "video")) for _ in range(rng.randint(0, 2))
    )
    text = rng.choice(("What is 6*7?", "Describe this.", "  Hello there  ", "Two lines\nof text", "東京?"))
    return ChatMessage("user", text, media=media)


def conversation(rng: random.Random, thinking: bool) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    if rng.random() < 0.5:
        messages.append(ChatMessage("system", rng.choice(("Be brief.", "  You are helpful.\n"))))
    turns = rng.randint(1, 3)
    for turn in range(turns):
        messages.append(user(rng))
        waiting = turn == turns - 1 and rng.random() < 0.4
        steps = rng.randint(0, 3) if not waiting else rng.randint(1, 3)
        for _ in range(steps):
            messages += tool_step(rng, thinking)
        if waiting:
            break
        if turn == turns - 1 and rng.random() < 0.3:
            break  # the last user turn waits for its first reply
        answer = rng.choice(("It is 42.", "```python\nprint('hi')\n```", "Done.  ", "  Sure."))
        thought = "Thinking it over." if thinking and rng.random() < 0.5 else ""
        messages.append(ChatMessage("assistant", answer, thought=thought))
    return messages


def corpus(seed: int, count: int) -> list[tuple[list[ChatMessage], bool]]:
    """``count`` conversations, each with whether thinking mode is on."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        thinking = rng.random() < 0.5
        out.append((conversation(rng, thinking), thinking))
    return out
