"""``gemma-chat tools``: every tool the model would be offered — built-ins, plug-ins, MCP servers'
tools — with where it comes from, whether it has side effects and whether a call asks first; then
each MCP server's state (and why one failed). Exit 0 when the listing worked (a failed server is
part of the listing), 2 on a configuration error."""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.flags import settings_from_args
from backend.config import locations
from backend.config.settings import Settings
from backend.terminal_text import terminal_safe
from backend.tools.from_settings import mcp_host, tool_runner
from backend.tools.mcp.host import ServerStatus
from backend.tools.spec import Tool


def approval_rule(tool: Tool, policy: str) -> str:
    if policy == "never":
        return "runs without asking (approval = never)"
    if policy == "every-call" or tool.side_effects:
        return "asks first"
    return "runs without asking"


def run_tools(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if not settings.tools.enabled:
        why = (
            "this model was trained without tool calls"
            if settings.demo
            else "tools.enabled = false / --no-tools"
        )
        print(f"Tools are off ({why}): the model is offered none.")
        return 0
    host = mcp_host(settings, locations.logs_dir())
    try:
        host.start()
        host.wait_settled()
        runner = tool_runner(settings, mcp=host)
        tools = list(runner.registry.tools.values())
        statuses = host.statuses()
        warnings = runner.registry.warnings
    finally:
        host.close()
    if args.json:
        print(json.dumps(_document(settings, tools, statuses, warnings), indent=2))
        return 0
    _print(settings, tools, statuses, warnings)
    return 0


def _document(
    settings: Settings, tools: list[Tool], statuses: list[ServerStatus], warnings: list[str]
) -> dict[str, object]:
    policy = settings.tools.approval
    return {
        "approval": policy,
        "tools": [
            {
                "name": t.name,
                "source": t.source,
                "side_effects": t.side_effects,
                "approval": approval_rule(t, policy),
                "description": t.description,
            }
            for t in tools
        ],
        "mcp_servers": [
            {
                "name": s.name,
                "state": s.state,
                "transport": s.transport,
                "tools": list(s.tools),
                "message": s.message,
            }
            for s in statuses
        ],
        "warnings": warnings,
    }


def _print(settings: Settings, tools: list[Tool], statuses: list[ServerStatus], warnings: list[str]) -> None:
    policy = settings.tools.approval
    width = max((len(t.name) for t in tools), default=4)
    print(f"{len(tools)} tool(s) offered to the model (approval policy: {policy})\n")
    for t in tools:  # names, descriptions and states can come from an MCP server: made terminal-safe
        effects = "side effects" if t.side_effects else "read-only"
        print(terminal_safe(f"  {t.name:<{width}}  {t.source:<22} {effects:<12} {approval_rule(t, policy)}"))
        print(terminal_safe(f"  {'':<{width}}  {t.description[:100]}"))
    if statuses:
        print("\nMCP servers:")
        for s in statuses:
            print(terminal_safe(f"  {s.describe()}  ({s.transport})"))
    for warning in warnings:
        print(f"warning: {terminal_safe(warning)}", file=sys.stderr)
