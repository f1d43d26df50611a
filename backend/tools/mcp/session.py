"""Opening one MCP client session over the server's transport (the SDK's stdio or streamable HTTP
client) on an exit stack that closes it (and stops a stdio server's processes). The caller
initializes it, under its own timeout: anyio's cancel scopes must nest inside the contexts.

A stdio server runs under ``backend.lifetime.mcp_guard``, which ends the server's whole process
tree — children that detach included — when the server, the app or the connection ends."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.config.settings import McpServerSettings
from backend.lifetime.mcp_guard import command as guard_command
from backend.tools.mcp.config import McpConfigError


async def open_session(
    stack: contextlib.AsyncExitStack,
    settings: McpServerSettings,
    errlog: Any,
    on_fault: Callable[[Exception], None] | None = None,
) -> Any:
    """``on_fault(error)`` gets each message the server sent that could not be read."""
    from mcp import ClientSession

    async def handle(message: Any) -> None:
        if isinstance(message, Exception) and on_fault is not None:
            on_fault(message)

    command, url = settings.command, settings.url
    if command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        guarded = guard_command([_executable(command, settings.cwd, settings.env), *settings.args])
        params = StdioServerParameters(
            command=guarded[0], args=guarded[1:], env=settings.env or None, cwd=settings.cwd
        )
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    elif url is not None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=settings.headers or None))
        read, write = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    else:  # the settings' validator already refuses this
        raise McpConfigError("An MCP server needs a command (stdio) or a url (streamable HTTP).")
    return await stack.enter_async_context(ClientSession(read, write, message_handler=handle))


def _executable(command: str, cwd: str | None, env: dict[str, str] | None) -> str:
    """``command`` as the server's path (a missing one fails here, as it would without the guard)."""
    if os.sep in command:
        path = Path(cwd or ".") / Path(command).expanduser()
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        return command
    found = shutil.which(command, path=(env or {}).get("PATH"))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return found
