"""Opening one MCP client session over the server's transport (the SDK's stdio or streamable HTTP
client) on an exit stack that closes it (and stops a stdio server's processes). The caller
initializes it, under its own timeout: anyio's cancel scopes must nest inside the contexts."""

from __future__ import annotations

import contextlib
from typing import Any

from backend.settings import McpServerSettings


async def open_session(stack: contextlib.AsyncExitStack, settings: McpServerSettings, errlog: Any) -> Any:
    from mcp import ClientSession

    if settings.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=settings.command, args=settings.args, env=settings.env or None, cwd=settings.cwd
        )
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert settings.url is not None
        client = await stack.enter_async_context(create_mcp_http_client(headers=settings.headers or None))
        read, write = await stack.enter_async_context(
            streamable_http_client(settings.url, http_client=client)
        )
    return await stack.enter_async_context(ClientSession(read, write))
