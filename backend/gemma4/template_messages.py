"""A conversation in the form every published Gemma 4 chat template reads the same way.

The app keeps a tool step as an assistant message with its calls, then one ``tool`` message per
result. Handed to the model's template like that, results are lost or misplaced: the templates
read a ``tool`` message's content as a string or a list of parts (a dict fails), match results
to calls by ``tool_call_id`` (else to the last call), and the launch revision drops ``tool``
messages altogether. Every revision, launch included, reads Gemma 4's native form: the results
on the assistant message that made the calls, as ``tool_responses`` (each a name and a
response). So a step becomes one assistant message with ``tool_calls`` (with ids) and
``tool_responses``, and no content: the templates write an assistant message's text *after*
its results and close the turn when it has any, which would end the model's turn before the
step that reads the results. The text a step wrote before its calls is kept for the turn's
closing message instead (the user saw it there, and the model reads it there next turn).

The thinking of an assistant message goes in ``reasoning``; each template decides whether the
model reads it again (the current ones: only within the turn that produced it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class MessageFields(Protocol):
    """What is read of a message (``backend.gemma4.messages.ChatMessage`` has these)."""

    @property
    def role(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def media(self) -> tuple[str, ...]: ...
    @property
    def tool_calls(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def name(self) -> str | None: ...
    @property
    def data(self) -> Any: ...
    @property
    def thought(self) -> str: ...


def template_messages(messages: Sequence[MessageFields]) -> list[dict[str, Any]]:
    """``messages`` as the dicts a Gemma 4 chat template renders."""
    out: list[dict[str, Any]] = []
    step: dict[str, Any] | None = None
    earlier_text: list[str] = []
    calls = 0
    for message in messages:
        if message.role == "tool":
            if step is None:  # a result with no call before it: keep it, on a step of its own
                step = {"role": "assistant", "content": "", "tool_responses": []}
                out.append(step)
            step["tool_responses"].append({"name": message.name or "unknown", "response": _response(message)})
            continue
        if message.role == "assistant" and message.tool_calls:
            step = {"role": "assistant", "content": "", "tool_calls": [], "tool_responses": []}
            for call in message.tool_calls:
                step["tool_calls"].append({"id": f"call_{calls}", **_call(call)})
                calls += 1
            if message.thought:
                step["reasoning"] = message.thought
            earlier_text.append(message.text)
            out.append(step)
            continue
        step = None
        if message.role == "assistant":
            text = "\n\n".join(t for t in [*earlier_text, message.text] if t.strip())
            earlier_text = []
            closing: dict[str, Any] = {"role": "assistant", "content": text}
            if message.thought:
                closing["reasoning"] = message.thought
            out.append(closing)
            continue
        earlier_text = []
        out.append({"role": message.role, "content": _content(message)})
    return out


def _content(message: MessageFields) -> Any:
    if not message.media:
        return message.text
    return [{"type": kind} for kind in message.media] + [{"type": "text", "text": message.text}]


def _call(call: dict[str, Any]) -> dict[str, Any]:
    inner = call.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else call
    arguments = function.get("arguments")
    return {
        "type": "function",
        "function": {
            "name": str(function.get("name") or "unknown"),
            "arguments": arguments if isinstance(arguments, dict) else {},
        },
    }


def _response(message: MessageFields) -> Any:
    if isinstance(message.data, dict):
        return message.data
    if message.data is not None:
        return {"value": message.data}
    return {"value": message.text}
