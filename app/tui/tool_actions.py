"""The tools in the app: the runner a chat uses, the approval dialog, the policy and the tool list."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from app.tui.screens.approval import ApprovalScreen
from backend.settings import APPROVAL_POLICIES, ApprovalPolicy, Settings
from backend.tools.from_settings import tool_runner
from backend.tools.runner import Decision, ToolRunner
from backend.tools.spec import Tool, ToolCall

POLICY_TEXT: dict[ApprovalPolicy, str] = {
    "side-effects": "ask before tools with side effects",
    "every-call": "ask before every tool call",
    "never": "never ask",
}


class ToolHost(Protocol):
    """What the tool actions need of the app they are mixed into."""

    settings: Settings
    tools: ToolRunner | None

    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...
    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    async def _approve(self, call: ToolCall, tool: Tool) -> Decision: ...


class ToolActions:
    """Mixed into ``GemmaChatApp``."""

    def _tool_runner(self: ToolHost) -> ToolRunner | None:
        """A fresh runner per chat ("always for this chat" approvals end with the chat)."""
        if not self.settings.tools.enabled:
            return None
        runner = tool_runner(self.settings, self._approve)
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
            f"{t.name}{' (side effects)' if t.side_effects else ''}: {t.description}"
            for t in self.tools.registry.tools.values()
        ]
        sandbox = ", ".join(self.settings.tools.allowed_dirs)
        self.notify("\n".join([*lines, f"files: {sandbox}", f"approval: {POLICY_TEXT[self.tools.policy]}"]))
