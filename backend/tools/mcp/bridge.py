"""From MCP to gemma-chat: a server's tool as a ``Tool`` named ``SERVER.tool``, and a call's result
as what the model reads back.

A tool is read-only (no approval asked under the default policy) only where its server says so
(``annotations.readOnlyHint``); everything else counts as having side effects. A result's text
blocks are joined. An image block is kept as a file (checked like an attachment) and described
in the text (``[image 1: image/png 64x64]``); the result is then a ``ToolOutput`` carrying the
file, which the timeline shows and the turn gives to a model that sees images. An image that
cannot be read, and an audio block, are described with the reason. Structured content without
text is returned as JSON. A result marked as
an error, content of unknown kinds or a reply that is not a tool result raise ``McpToolError``
with the server's own words, which the runner hands to the model as the call's error.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from backend.errors import GemmaChatError
from backend.tools.result_images import keep_image
from backend.tools.spec import Tool, ToolOutput, strip_titles

TOOL_NAME = re.compile(r"[^A-Za-z0-9_\-]")
MAX_DESCRIPTION = 1024


class McpToolError(GemmaChatError):
    """An MCP tool call that did not give a usable result."""


def offered_name(server: str, tool: str) -> str:
    """``SERVER.tool``, with characters Gemma 4's call syntax cannot carry replaced by ``_``."""
    return f"{server}.{TOOL_NAME.sub('_', tool) or '_'}"


def offered_names(server: str, tools: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each tool's offered name, distinct and stable, and a notice per renamed tool.

    Tools whose names become the same once sanitized (``a b``, ``a.b``, ``a/b``, ``a_b``) each get
    their own: a tool already named so keeps the plain name, every other one gets a suffix made
    from its own name's hash (``srv.a_b_3f9c1e``), so the names do not depend on the order the
    server lists them in, and a call always reaches the tool it names."""
    import hashlib

    groups: dict[str, list[str]] = {}
    for tool in dict.fromkeys(tools):
        groups.setdefault(offered_name(server, tool), []).append(tool)
    names: dict[str, str] = {}
    notices: list[str] = []
    for plain, members in groups.items():
        for tool in members:
            if len(members) == 1 or offered_name(server, tool) == f"{server}.{tool}":
                names[tool] = plain
                continue
            names[tool] = f"{plain}_{hashlib.sha256(tool.encode()).hexdigest()[:6]}"
            notices.append(f"{tool!r} → {names[tool]}")
    return names, notices


def to_tool(
    server: str, listed: Any, call: Callable[..., Any], timeout_s: float, name: str | None = None
) -> Tool:
    """``listed`` is an ``mcp_types.Tool``; ``call(**arguments)`` runs it on the server; ``name``
    is its offered name (from ``offered_names``)."""
    schema = listed.input_schema if isinstance(listed.input_schema, dict) else {}
    schema = strip_titles({"type": "object", "properties": {}, **schema})
    annotations = listed.annotations
    read_only = bool(annotations is not None and annotations.read_only_hint)
    description = " ".join((listed.description or listed.title or listed.name).split())[:MAX_DESCRIPTION]
    return Tool(
        name=name or offered_name(server, listed.name),
        description=description,
        function=call,
        arguments_model=None,
        side_effects=not read_only,
        timeout_s=timeout_s,
        schema=schema,
        source=f"mcp: {server}",
    )


def result_value(server: str, result: Any) -> Any:
    """What the model reads back from an ``mcp_types.CallToolResult``."""
    import mcp_types

    if not isinstance(result, mcp_types.CallToolResult):
        raise McpToolError(f"MCP server {server} answered with no tool result ({type(result).__name__}).")
    images: list[str] = []
    parts = [_block(server, block, images) for block in result.content or []]
    text = "\n".join(p for p in parts if p)
    if result.is_error:
        raise McpToolError(f"{server}: {text or 'the tool failed (no message)'}")
    if not text and result.structured_content is not None:
        value: Any = json.loads(json.dumps(result.structured_content, default=str))
    else:
        value = text
    return ToolOutput(value, tuple(images)) if images else value


def _block(server: str, block: Any, images: list[str]) -> str:
    import mcp_types

    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        kept = keep_image(block.data, block.mime_type)
        if isinstance(kept, str):
            return f"[image {block.mime_type}, {_size(block.data)} bytes, not shown: {kept}]"
        images.append(kept.path)
        return f"[image {len(images)}: {block.mime_type} {kept.detail}]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        return getattr(resource, "text", None) or f"[resource {resource.uri}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource {block.uri}]"
    raise McpToolError(
        f"MCP server {server} returned content gemma-chat cannot read ({type(block).__name__})."
    )


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)
