"""Export a chat as Markdown, or as JSON — a "performance receipt" with engine arguments of each
path, package versions, hardware, and every turn's figures."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from typing import Any

from backend.chat.code_text import code_as_code
from backend.chat.conversation import Conversation
from backend.provenance import hardware, package_versions
from backend.tools.runner import ToolRecord
from backend.tools.timeline import timeline_line

_DETAILS_TAG = re.compile(r"<(/?details)", re.IGNORECASE)


def chat_markdown(conversation: Conversation) -> str:
    lines = [f"# {conversation.title}", ""]
    if conversation.system_prompt:
        lines += [f"> system: {conversation.system_prompt}", ""]
    for turn in conversation.turns:
        who = "You" if turn.role == "user" else f"Gemma ({turn.path})"
        lines += [f"## {who}", ""]
        tools = turn.extra.get("tools")
        if isinstance(tools, list) and tools:
            for record in map(ToolRecord.from_json, tools):
                lines.append(f"- `{timeline_line(record)}`")
                lines += [f"  ![image {n}]({path})" for n, path in enumerate(record.images, 1)]
            lines.append("")
        thought = turn.extra.get("thought")
        if isinstance(thought, str) and thought:
            safe = _DETAILS_TAG.sub(r"&lt;\1", thought)  # a thought's own </details> cannot end the block
            quoted = "\n".join(f"> {line}" if line else ">" for line in safe.splitlines())
            lines += ["<details><summary>thought</summary>", "", quoted, "", "</details>", ""]
        lines += [code_as_code(turn.text), ""]  # unfenced code keeps its indentation
        if turn.metrics is not None:
            m = turn.metrics
            lines += [f"*{m.summary_line()}*", ""]
    return "\n".join(lines)


def receipt(conversation: Conversation, engine_args: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "gemma-chat performance receipt",
        "exported": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "chat": {"title": conversation.title, "system_prompt": conversation.system_prompt},
        "engines": engine_args,
        "packages": package_versions(),
        "hardware": hardware(),
        "turns": [
            {
                "role": t.role,
                "text": t.text,
                "path": t.path,
                "metrics": asdict(t.metrics) if t.metrics else None,
                **({"extra": t.extra} if t.extra else {}),
            }
            for t in conversation.turns
        ],
    }


def receipt_json(conversation: Conversation, engine_args: dict[str, dict[str, Any]]) -> str:
    return json.dumps(receipt(conversation, engine_args), indent=2, default=str)
