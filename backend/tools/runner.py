"""Running one tool call: look the tool up, validate its arguments, ask for approval when the
policy says so, run it in a thread with its timeout, and record what happened.

Every outcome — success, unknown tool, invalid arguments, malformed call text, denial, an
exception, a timeout, a cancel — becomes a ``ToolRecord``; its ``response()`` is what the model
reads next, so it can correct itself. Nothing here raises for a bad call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from backend.config.settings import ApprovalPolicy
from backend.gemma4.messages import valid_utf8
from backend.gemma4.tool_call import ToolCall
from backend.tools.registry import ToolRegistry
from backend.tools.spec import Tool, ToolArgumentsError, ToolOutput

Status = Literal[
    "ok",
    "error",
    "denied",
    "unknown_tool",
    "invalid_arguments",
    "malformed",
    "timeout",
    "cancelled",
    "skipped",
]
Decision = Literal["once", "always", "deny"]
Approver = Callable[[ToolCall, Tool], Awaitable[Decision]]


@dataclass(frozen=True)
class ToolRecord:
    """One call in a turn's timeline."""

    step: int
    name: str
    arguments: dict[str, Any]
    status: Status
    result: Any = None
    message: str = ""
    duration_s: float = 0.0
    reused: bool = False
    """True when the result came from the comparison's other path (the tool ran once)."""
    images: tuple[str, ...] = ()
    """Image files the result carried (an MCP server's image content), in order."""
    full_chars: int = 0
    """Set by ``bounded``: the result was cut to its first ``max_chars`` characters of JSON text
    from this many (what the model read, the timeline shows and the history keeps is the cut one)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def bounded(self, max_chars: int) -> ToolRecord:
        """This record with its result cut to what the model may read (``max_result_chars``), so
        the copy the history keeps is the model's copy: a 50 MB result is never stored whole."""
        if not self.ok or self.full_chars:
            return self
        text = json.dumps(self.result, ensure_ascii=False)
        if len(text) <= max_chars:
            return self
        return replace(self, result=text[:max_chars], full_chars=len(text))

    def response(self, max_chars: int = 4000) -> dict[str, Any]:
        """What the model reads back (the chat template renders it as a tool response)."""
        if not self.ok:
            return {"error": self.message}
        record = self.bounded(max_chars)
        if record.full_chars:
            return {"result": record.result, "truncated": True}
        return {"result": self.result}

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "name": self.name,
            "arguments": self.arguments,
            "status": self.status,
            "result": self.result,
            "message": self.message,
            "duration_s": round(self.duration_s, 4),
            "reused": self.reused,
            "images": list(self.images),
            **({"full_chars": self.full_chars} if self.full_chars else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolRecord:
        return cls(
            step=int(data.get("step", 0)),
            name=str(data.get("name", "")),
            arguments=dict(data.get("arguments") or {}),
            status=data.get("status", "error"),
            result=data.get("result"),
            message=str(data.get("message", "")),
            duration_s=float(data.get("duration_s", 0.0)),
            reused=bool(data.get("reused", False)),
            images=tuple(str(p) for p in data.get("images") or ()),
            full_chars=int(data.get("full_chars", 0) or 0),
        )


def call_key(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}:{json.dumps(arguments, sort_keys=True, default=str)}"


@dataclass
class ToolRunner:
    """Runs calls for one chat: remembers "always for this chat" approvals."""

    registry: ToolRegistry
    policy: ApprovalPolicy = "side-effects"
    approver: Approver | None = None
    always_allowed: set[str] = field(default_factory=set)

    def needs_approval(self, tool: Tool) -> bool:
        if self.policy == "never" or tool.name in self.always_allowed:
            return False
        return self.policy == "every-call" or tool.side_effects

    async def run(
        self, call: ToolCall, step: int, cache: MutableMapping[str, ToolRecord] | None = None
    ) -> ToolRecord:
        """The call's record; its duration is the tool's own run time (not the approval wait)."""
        if call.error:
            return ToolRecord(step, call.name or "?", {}, "malformed", message=call.error)
        tool = self.registry.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.registry.tools)) or "none"
            return ToolRecord(
                step,
                call.name,
                call.arguments,
                "unknown_tool",
                message=f"there is no tool named {call.name!r} (tools: {known})",
            )
        try:
            arguments = tool.validate(tool.arguments_of(call))
        except ToolArgumentsError as error:
            return ToolRecord(
                step, call.name, json_safe(call.arguments), "invalid_arguments", message=str(error)
            )
        key = call_key(tool.name, arguments)
        if cache is not None and key in cache:
            return replace(cache[key], step=step, reused=True)
        decision: Decision = "once"
        if self.needs_approval(tool):
            decision = await self._ask(call, tool)
            if decision == "always":
                self.always_allowed.add(tool.name)
        if decision == "deny":
            record = ToolRecord(
                step,
                tool.name,
                json_safe(arguments),
                "denied",
                message=f"the user did not allow {tool.name} to run",
            )
        else:
            record = await self._execute(tool, arguments, step)
        if cache is not None:  # a comparison's second path gets the same result (or refusal)
            cache[key] = record
        return record

    async def _ask(self, call: ToolCall, tool: Tool) -> Decision:
        if self.approver is None:
            return "deny"
        return await self.approver(call, tool)

    async def _execute(self, tool: Tool, arguments: dict[str, Any], step: int) -> ToolRecord:
        started = time.perf_counter()
        record = await self._call(tool, arguments, step)
        return replace(record, duration_s=time.perf_counter() - started)

    async def _call(self, tool: Tool, arguments: dict[str, Any], step: int) -> ToolRecord:
        shown = json_safe(arguments)
        try:
            value = await asyncio.wait_for(_in_daemon_thread(tool.function, arguments), tool.timeout_s)
        except TimeoutError:
            message = f"{tool.name} did not finish within {tool.timeout_s:g} s"
            return ToolRecord(step, tool.name, shown, "timeout", message=message)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a tool's own failure goes back to the model, never up
            return ToolRecord(step, tool.name, shown, "error", message=_describe(error))
        output = value if isinstance(value, ToolOutput) else ToolOutput(value)
        return ToolRecord(step, tool.name, shown, "ok", result=json_safe(output.value), images=output.images)


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (pydantic's conversion) whose text is valid UTF-8 (a file name
    that is not shows its bytes escaped); text if even that cannot be written."""
    try:
        plain = _utf8(to_jsonable_python(value))
        json.dumps(plain)
        return plain
    except (ValueError, TypeError, OverflowError):
        text = repr(value) if not isinstance(value, int) else f"<an integer of {value.bit_length()} bits>"
        return text[:2000]


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    if isinstance(value, dict):
        return {valid_utf8(str(k)): _utf8(v) for k, v in value.items()}
    return value


def _in_daemon_thread(function: Callable[..., Any], arguments: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a tool in a daemon thread: one that outlives its timeout cannot keep the process alive
    (``asyncio.to_thread``'s executor is joined at exit, so a hung plug-in would hang ``ask``)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = function(**arguments), None
        except BaseException as raised:  # delivered to the awaiting coroutine
            result, error = None, raised
        with contextlib.suppress(RuntimeError):  # the loop has closed (the turn was abandoned)
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="gemma-chat-tool", daemon=True).start()
    return future


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return text if isinstance(error, ValueError | OSError) else f"{type(error).__name__}: {text}"
