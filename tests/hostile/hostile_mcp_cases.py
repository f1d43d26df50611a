"""MCP cases of the hostile corpus (issue 37, items 10-12): a raw stdio server
(``tests/support/mcp_raw_server.py``) whose tool names collide once sanitized, that offers 500 tools,
a 3,000-deep schema or a 100,000-deep result, or writes lines that are not JSON to stdout."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.hostile_case import Case

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL = ROOT / "assets" / "demo" / "model"


def mcp_cases(d: Path) -> Iterator[Case]:
    logs = str(d / "logs")
    limit = {"timeout_s": 45}
    yield Case(
        "12 tool names that collide once sanitized",
        "tests.hostile.hostile_mcp:colliding_names",
        [logs],
        "ok",
        ("ready, 12 tool(s)", "renamed, as their names are the same", "'a b' → srv.a_b_"),
        limit,
    )
    yield Case(
        "500 MCP tools and a two-word prompt",
        "tests.hostile.hostile_mcp:many_tools_turn",
        [logs, str(DEMO_MODEL)],
        "refused",
        ("tool declarations are too large", "MCP servers srv (500)", "enabled = false"),
        {"timeout_s": 60},
    )
    yield Case(
        "a 3,000-deep input schema",
        "tests.hostile.hostile_mcp:server_state",
        ["deep-schema", logs],
        "refused",
        ("srv: failed", "nested too deeply"),
        limit,
    )
    yield Case(
        "a 100,000-deep result",
        "tests.hostile.hostile_mcp:call_result",
        ["deep-result", logs],
        "refused",
        ("srv", "nested too deeply"),
        limit,
    )
    yield Case(
        "gemma-chat tools and a server that writes non-JSON to stdout",
        "tests.hostile.hostile_mcp:tools_command",
        [str(d / "home"), sys.executable],
        "ok",
        ("srv: ready",),
        limit,
    )
    yield Case(
        "gemma-chat tools and escape sequences in a tool's name and description",
        "tests.hostile.hostile_mcp:tools_command",
        [str(d / "home-escapes"), sys.executable, "escapes"],
        "ok",
        ("Reads ␛]52;c;", "␛]0;pwned␇", "srv: ready"),
        limit,
    )
