"""The tools a chat offers: the built-ins, plug-ins from the ``gemma_chat.tools`` entry-point group,
and the tools of the MCP servers that are up (``remote``, asked at each use: servers come and go).

A plug-in entry point names a ``Tool`` (see ``backend.tools.spec.tool``), a typed function, or a
list of either. One that fails to import or describe itself is skipped with a warning (shown
by the app and ``gemma-chat tools``); the rest still load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from backend.tools.builtins import ToolContext, builtin_tools
from backend.tools.spec import Tool

ENTRY_POINT_GROUP = "gemma_chat.tools"


@dataclass
class ToolRegistry:
    own: dict[str, Tool] = field(default_factory=dict)
    """Built-ins and plug-ins."""
    warnings: list[str] = field(default_factory=list)
    remote: Callable[[], Iterable[Tool]] | None = None
    """The MCP servers' tools as of now (named ``SERVER.tool``, so they cannot collide)."""

    @property
    def tools(self) -> dict[str, Tool]:
        found = dict(self.own)
        for tool in self.remote() if self.remote is not None else ():
            found.setdefault(tool.name, tool)
        return found

    @classmethod
    def load(
        cls,
        context: ToolContext,
        plugins: Callable[[], Iterable[EntryPoint]] | None = None,
        remote: Callable[[], Iterable[Tool]] | None = None,
    ) -> ToolRegistry:
        registry = cls(remote=remote)
        for tool in builtin_tools(context):
            registry.add(tool)
        for entry in (plugins or _entry_points)():
            try:
                for tool in _tools_of(entry.load()):
                    registry.add(replace(tool, source=f"plug-in: {entry.value}"), source=entry.value)
            except Exception as error:  # a broken plug-in must not stop the app
                registry.warnings.append(f"Skipped tool plug-in {entry.name} ({entry.value}): {error}")
        return registry

    def add(self, tool: Tool, source: str = "built-in") -> None:
        if tool.name in self.own:
            self.warnings.append(f"Skipped tool {tool.name} from {source}: the name is already taken")
            return
        self.own[tool.name] = tool

    def declarations(self) -> list[dict[str, Any]]:
        return [tool.declaration() for tool in self.tools.values()]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


def _entry_points() -> Iterable[EntryPoint]:
    return entry_points(group=ENTRY_POINT_GROUP)


def _tools_of(obj: Any) -> list[Tool]:
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, list | tuple):
        return [tool for item in obj for tool in _tools_of(item)]
    if callable(obj):
        return [Tool.from_function(obj)]
    raise TypeError(f"{obj!r} is not a tool, a typed function or a list of them")
