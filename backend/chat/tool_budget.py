"""When a prompt does not fit because of the tools offered, not the user's words: the tool
declarations' share of the context window, and a message that says so.

Every turn that offers tools renders their declarations (name, description, JSON schema) into
the prompt. A few hundred MCP tools can take more than the whole window, so that a two-word
prompt "does not fit": the message must then name the declarations, the MCP servers that bring
them, and how to offer fewer — not ask the user to shorten a prompt that is already short.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from backend.errors import PromptTooLong
from backend.gemma4.messages import ChatMessage, PromptRenderer


def declarations_too_large(
    renderer: PromptRenderer | Any,
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    prompt_tokens: int,
    media_tokens: int,
    budget: int,
    window: int,
    path: str,
) -> PromptTooLong | None:
    """The error to raise when the prompt (``prompt_tokens`` rendered with ``tools``, plus
    ``media_tokens`` for its attachments) would fit without the declarations; None when it would
    not (the prompt itself is too long) or no tool is offered."""
    if not tools:
        return None
    plain = renderer.render(messages, None).token_count + media_tokens
    if plain + budget > window:
        return None
    share = prompt_tokens + media_tokens - plain
    if share <= budget:  # the reply budget takes more of the window than the declarations do
        room = window - prompt_tokens - media_tokens
        return PromptTooLong(
            f"The reply budget ({budget} tokens) is too large for the {path} path's {window}-token "
            f"context window: the prompt takes {prompt_tokens + media_tokens} tokens ({share} of them "
            f"the declarations of {len(tools)} tools).",
            f"Lower --max-tokens (or [sampling] max_tokens) to {room} or less"
            if room > 0
            else "Turn tools off with --no-tools, or raise --max-model-len.",
        )
    servers = Counter(_server(d) for d in tools)
    mcp = [f"{name} ({count})" for name, count in servers.most_common() if name]
    builtin = servers.get("", 0)
    whose = f"MCP servers {', '.join(mcp)}" if mcp else "the built-in tools and plug-ins"
    if mcp and builtin:
        whose += f", and {builtin} built-in or plug-in tool(s)"
    fix = (
        "Offer fewer tools: disable a server with `enabled = false` in its [mcp.servers.NAME] table (or "
        '"disabled": true in the MCP servers file), turn tools off with --no-tools, or raise --max-model-len.'
    )
    return PromptTooLong(
        f"The tool declarations are too large: {len(tools)} tools ({whose}) take {share} tokens of the "
        f"{path} path's {window}-token context window ({100 * share // max(window, 1)}%), so even this "
        f"prompt ({plain} tokens without them) and the reply budget ({budget}) do not fit.",
        fix,
    )


def _server(declaration: dict[str, Any]) -> str:
    """The MCP server of a declared tool (its name is ``SERVER.tool``), or "" for a built-in."""
    name = str((declaration.get("function") or {}).get("name", ""))
    return name.split(".", 1)[0] if "." in name else ""
