"""The tool runner a chat uses, and the MCP host its servers run in, from the user's settings."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from backend.config.settings import Settings
from backend.tools.builtins import ToolContext
from backend.tools.mcp.config import configured_servers
from backend.tools.mcp.host import McpHost
from backend.tools.registry import ToolRegistry
from backend.tools.runner import Approver, ToolRunner
from backend.tools.sandbox import Sandbox


def tool_runner(
    settings: Settings,
    approver: Approver | None = None,
    extra_dirs: Iterable[str] = (),
    mcp: McpHost | None = None,
) -> ToolRunner:
    """Built-ins, plug-ins and ``mcp``'s servers' tools, the sandbox from ``tools.allowed_dirs``
    (+ ``extra_dirs``), the policy."""
    context = ToolContext(
        sandbox=Sandbox.of([*settings.tools.allowed_dirs, *extra_dirs]),
        history_path=settings.history_path(),
    )
    registry = ToolRegistry.load(context, remote=mcp.tools if mcp is not None else None)
    return ToolRunner(registry, policy=settings.tools.approval, approver=approver)


def mcp_host(settings: Settings, log_dir: Path | None = None) -> McpHost:
    """The configured MCP servers, not started (``McpConfigError`` for a bad configuration)."""
    return McpHost(configured_servers(settings.mcp), log_dir)
