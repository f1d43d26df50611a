"""An MCP server for the tests, written with the SDK's server side.

``python tests/mcp_server.py stdio [MODE]`` or ``… http PORT [MODE]``. MODE ``ok`` (default)
serves two tools (``add``, read-only; ``note``, with side effects);
``exit`` exits before answering; ``hang`` never answers at all; ``garbage`` answers a call with
content of a kind MCP does not have; ``crash`` exits in the middle of a ``note`` call; ``slow``
takes 30 s over a ``note`` call.
"""

from __future__ import annotations

import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

MODE = "ok"


def build() -> MCPServer:
    server = MCPServer("gemma-chat-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def note(text: str) -> str:
        """Write a note (a side effect)."""
        if MODE == "crash":
            os._exit(3)
        if MODE == "slow":
            time.sleep(30)
        return f"noted: {text}"

    return server


def main() -> None:
    global MODE
    transport = sys.argv[1]
    MODE = sys.argv[-1] if len(sys.argv) > 2 and not sys.argv[-1].isdigit() else "ok"
    if MODE == "exit":
        sys.exit(1)
    if MODE == "hang":
        time.sleep(3600)
    if MODE == "garbage":
        garbage_stdio()
        return
    server = build()
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))


def garbage_stdio() -> None:
    """Speaks just enough JSON-RPC to start and list one tool, then answers its call with content
    of a kind MCP does not have."""
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "odd", "description": "Odd.", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "hologram", "beams": 3}]}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
