"""A tool turn's calls and responses as JSON, so the history keeps what the model saw."""

from __future__ import annotations

from typing import Any

from backend.gemma4.messages import ChatMessage


def transcript_to_json(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [
        {"role": m.role, "text": m.text, "tool_calls": list(m.tool_calls), "name": m.name, "data": m.data}
        | ({"images": list(m.images)} if m.images else {})
        | ({"thought": m.thought} if m.thought else {})
        for m in messages
    ]


def transcript_from_json(items: list[dict[str, Any]]) -> list[ChatMessage]:
    return [
        ChatMessage(
            item.get("role", "assistant"),
            str(item.get("text", "")),
            tool_calls=tuple(item.get("tool_calls") or ()),
            name=item.get("name"),
            data=item.get("data"),
            images=tuple(str(p) for p in item.get("images") or ()),
            thought=str(item.get("thought") or ""),
        )
        for item in items
    ]
