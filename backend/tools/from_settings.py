"""The tool runner a chat uses, from the user's settings."""

from __future__ import annotations

from collections.abc import Iterable

from backend.settings import Settings
from backend.tools.builtins import ToolContext
from backend.tools.registry import ToolRegistry
from backend.tools.runner import Approver, ToolRunner
from backend.tools.sandbox import Sandbox


def tool_runner(
    settings: Settings, approver: Approver | None = None, extra_dirs: Iterable[str] = ()
) -> ToolRunner:
    """Built-ins and plug-ins, the sandbox from ``tools.allowed_dirs`` (+ ``extra_dirs``), the policy."""
    context = ToolContext(
        sandbox=Sandbox.of([*settings.tools.allowed_dirs, *extra_dirs]),
        history_path=settings.history_path(),
    )
    return ToolRunner(ToolRegistry.load(context), policy=settings.tools.approval, approver=approver)
