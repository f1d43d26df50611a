"""The tools in the app: the runner a chat uses, the MCP servers (started in the background,
listed, restarted, disabled, closed with the app), the approval dialog, the policy and the list."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol

from textual.app import SystemCommand

from app.tui.screens.approval import ApprovalScreen
from app.tui.untrusted import escaped
from backend.config import locations
from backend.config.settings import APPROVAL_POLICIES, ApprovalPolicy, Settings
from backend.errors import GemmaChatError
from backend.gemma4.tool_call import ToolCall
from backend.tools.from_settings import mcp_host, tool_runner
from backend.tools.mcp.host import McpHost
from backend.tools.runner import Decision, ToolRunner
from backend.tools.spec import Tool

POLICY_TEXT: dict[ApprovalPolicy, str] = {
    "side-effects": "ask before tools with side effects",
    "every-call": "ask before every tool call",
    "never": "never ask",
}


class ToolHost(Protocol):
    """What the tool actions need of the app they are mixed into."""

    settings: Settings
    tools: ToolRunner | None
    mcp: McpHost | None
    status: Any
    _mcp_told: set[str]

    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    def _mcp_changed(self) -> None: ...
    def _show_mcp(self) -> None: ...
    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...
    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    async def _approve(self, call: ToolCall, tool: Tool) -> Decision: ...


class ToolActions:
    """Mixed into ``GemmaChatApp``."""

    def _mcp_host(self: ToolHost) -> McpHost | None:
        """The configured MCP servers (not started yet); a bad configuration is shown, not fatal."""
        if not self.settings.tools.enabled:
            return None
        try:
            host = mcp_host(self.settings, locations.logs_dir())
        except GemmaChatError as error:
            self.call_later(self.notify, f"MCP servers not started: {error}", severity="error", timeout=15)
            return None
        host.listen(lambda: self.call_from_thread(self._mcp_changed))
        return host

    def _start_mcp(self: ToolHost) -> None:
        if self.mcp is not None:
            self.mcp.start()
            self._show_mcp()

    def _mcp_changed(self: ToolHost) -> None:
        self._show_mcp()
        if self.mcp is None:
            return
        for status in self.mcp.statuses():
            if status.state == "failed" and status.message not in self._mcp_told:
                self._mcp_told.add(status.message)
                self.notify(f"MCP server {status.describe()}", severity="warning", timeout=12)

    def _show_mcp(self: ToolHost) -> None:
        if self.mcp is None:
            return
        statuses = self.mcp.statuses()
        ready = [s for s in statuses if s.state == "ready"]
        starting = any(s.state == "starting" for s in statuses)
        enabled = [s for s in statuses if s.state != "disabled"]
        label = f"mcp {len(ready)}/{len(enabled)}" + ("…" if starting else "")
        self.status.mcp = label if enabled else ""

    async def _close_mcp(self: ToolHost) -> None:
        if self.mcp is not None:
            await asyncio.to_thread(self.mcp.close)

    def mcp_commands(self: ToolHost) -> Iterable[SystemCommand]:
        """Palette entries: each server's state, restart and disable."""
        if self.mcp is None:
            return
        host = self.mcp
        for status in host.statuses():
            name = status.name
            yield SystemCommand(  # the palette reads titles and help as markup: a server's text is escaped
                f"MCP: restart {escaped(name)}",
                escaped(f"{status.describe()} · {status.transport}"),
                lambda n=name: host.restart(n),
            )
            if status.state != "disabled":
                yield SystemCommand(
                    f"MCP: disable {escaped(name)}",
                    "Stop it and offer none of its tools",
                    lambda n=name: host.disable(n),
                )

    def _tool_runner(self: ToolHost) -> ToolRunner | None:
        """A fresh runner per chat ("always for this chat" approvals end with the chat)."""
        if not self.settings.tools.enabled:
            return None
        runner = tool_runner(self.settings, self._approve, mcp=self.mcp)
        for warning in runner.registry.warnings:
            self.call_later(self.notify, warning, severity="warning", timeout=10)
        return runner

    async def _approve(self: ToolHost, call: ToolCall, tool: Tool) -> Decision:
        decided: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()

        def answer(decision: Decision | None) -> None:
            if not decided.done():
                decided.set_result(decision or "deny")

        self.push_screen(ApprovalScreen(call, tool), answer)
        return await decided

    def action_tool_policy(self: ToolHost) -> None:
        current = APPROVAL_POLICIES.index(self.settings.tools.approval)
        policy = APPROVAL_POLICIES[(current + 1) % len(APPROVAL_POLICIES)]
        self.settings.tools.approval = policy
        if self.tools is not None:
            self.tools.policy = policy
        self.notify(f"Tool approval: {POLICY_TEXT[policy]}.")

    def action_list_tools(self: ToolHost) -> None:
        if self.tools is None:
            self.notify("Tools are off (tools.enabled = false).")
            return
        lines = [
            f"{t.name} ({t.source}{', side effects' if t.side_effects else ''}): {t.description}"
            for t in self.tools.registry.tools.values()
        ]
        servers = [f"MCP {s.describe()}" for s in self.mcp.statuses()] if self.mcp is not None else []
        sandbox = ", ".join(self.settings.tools.allowed_dirs)
        self.notify(
            "\n".join([*lines, *servers, f"files: {sandbox}", f"approval: {POLICY_TEXT[self.tools.policy]}"]),
            timeout=20,
        )
