"""An MCP server for the tests, written with the SDK's server side.

``python tests/support/mcp_server.py stdio [MODE]`` or ``… http PORT [MODE]``. MODE ``ok`` (default)
serves three tools (``add``, read-only; ``note``, with side effects; ``swatch``, read-only,
which answers with text and a PNG — or, given ``bomb``, a PNG whose header claims 100000x100000);
``exit`` exits before answering; ``hang`` never answers at all; ``garbage`` answers a call with
content of a kind MCP does not have; ``crash`` exits in the middle of a ``note`` call; ``slow``
takes 30 s over a ``note`` call.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
import zlib

from mcp.server.mcpserver import Image, MCPServer
from mcp_types import ToolAnnotations

MODE = "ok"


def build() -> MCPServer:
    server = MCPServer("gemma-chat-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def swatch(colour: str, bomb: bool = False) -> list[object]:
        """Draw a 32x16 swatch of an RGB colour given as #rrggbb."""
        return [f"a swatch of {colour}", Image(data=_png(colour, bomb), format="png")]

    @server.tool()
    def note(text: str) -> str:
        """Write a note (a side effect)."""
        if MODE == "crash":
            os._exit(3)
        if MODE == "slow":
            time.sleep(30)
        return f"noted: {text}"

    return server


def _png(colour: str, bomb: bool) -> bytes:
    """A solid PNG written by hand (the server needs no imaging library); ``bomb``: its header
    claims 100000x100000 pixels over the same few bytes."""
    width, height = (100_000, 100_000) if bomb else (32, 16)
    red, green, blue = (int(colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))
    row = b"\x00" + bytes([red, green, blue]) * (32 if bomb else width)
    data = zlib.compress(row * (1 if bomb else height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


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
