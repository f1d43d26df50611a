"""The MCP host: every configured server's session, run on a background thread's event loop so
that starting servers never delays the app, and tool calls (which the runner makes from worker
threads) reach them through ``call``.

Each server goes ``starting`` → ``ready`` (its tools offered) or ``failed`` (with one readable
reason: it exited, it hung past ``timeout_s`` in start-up or ``list_tools``, it answered
garbage); ``disabled`` servers are not started. A server that dies mid-call fails that call
with its reason and is marked ``failed``; ``restart`` brings it back. ``close`` ends every
session — the SDK's stdio transport terminates each server's process tree — and joins the
thread, so no server outlives the app. A stdio server's stderr goes to its log file, never to
the terminal the app draws on.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from backend.config.settings import McpServerSettings
from backend.tools.mcp.bridge import McpToolError, offered_names, result_value, to_tool
from backend.tools.mcp.faults import Faults, UnreadableAnswer, route_sdk_log
from backend.tools.spec import Tool

State = Literal["starting", "ready", "failed", "disabled", "stopped"]
CLOSE_TIMEOUT_S = 10.0
SETTLE_GRACE_S = 5.0


@dataclass(frozen=True)
class ServerStatus:
    name: str
    state: State
    transport: str
    tools: tuple[str, ...] = ()
    message: str = ""

    def describe(self) -> str:
        if self.state == "ready":
            return f"{self.name}: ready, {len(self.tools)} tool(s)" + (
                f" — renamed, as their names are the same once made callable: {self.message}"
                if self.message
                else ""
            )
        return f"{self.name}: {self.state}" + (f" — {self.message}" if self.message else "")


@dataclass
class _Server:
    name: str
    settings: McpServerSettings
    status: ServerStatus
    tools: tuple[Tool, ...] = ()
    session: Any = None
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    faults: Faults = field(default_factory=Faults)


class McpHost:
    def __init__(self, servers: dict[str, McpServerSettings], log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self._servers = {
            name: _Server(name, s, ServerStatus(name, "starting" if s.enabled else "disabled", s.transport()))
            for name, s in servers.items()
        }
        self._listeners: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._settled = threading.Condition()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start every enabled server in the background; returns at once."""
        if self._thread is not None or not self._servers:
            return
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="gemma-chat-mcp", daemon=True)
        self._thread.start()
        ready.wait()
        atexit.register(self.close)  # however the process ends, no server outlives it
        if self.log_dir is not None:
            route_sdk_log(self.log_dir)
        for server in self._servers.values():
            if server.settings.enabled:
                self._submit(self._launch(server))

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stop every server (their processes with them) and the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(FutureTimeout, RuntimeError):
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout_s)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        self._loop = self._thread = None

    def restart(self, name: str) -> None:
        server = self._servers[name]
        self.start()
        self._set(server, "starting")  # at once, so that wait_settled waits for the new start
        self._submit(self._relaunch(server, enable=True))

    def disable(self, name: str) -> None:
        server = self._servers[name]
        if not self._submit(self._relaunch(server, enable=False)):
            self._set(server, "disabled")  # never started: nothing to stop

    def wait_settled(self, timeout_s: float | None = None) -> bool:
        """Block until no server is starting (True), or ``timeout_s`` passed (False); by default
        the longest server timeout and a grace, since each server settles within its own."""
        if timeout_s is None:
            timeout_s = (
                max((s.settings.timeout_s for s in self._servers.values()), default=0.0) + SETTLE_GRACE_S
            )
        with self._settled:
            return self._settled.wait_for(
                lambda: all(s.status.state != "starting" for s in self._servers.values()), timeout_s
            )

    def listen(self, callback: Callable[[], None]) -> None:
        """``callback()`` (from the host's thread) whenever a server's state changes."""
        self._listeners.append(callback)

    # -- what the chat sees ---------------------------------------------------------------
    def statuses(self) -> list[ServerStatus]:
        return [s.status for s in self._servers.values()]

    def tools(self) -> list[Tool]:
        return [tool for s in self._servers.values() if s.status.state == "ready" for tool in s.tools]

    def call(self, server_name: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """Run ``tool`` on its server (from any thread but the host's) and return its result value."""
        loop = self._loop
        if loop is None:
            raise McpToolError(f"MCP server {server_name} is not running.")
        future: Future[Any] = asyncio.run_coroutine_threadsafe(
            self._call(self._servers[server_name], tool, arguments), loop
        )
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            future.cancel()
            raise McpToolError(
                f"MCP server {server_name} did not answer {tool} within {timeout_s:g} s."
            ) from None

    # -- on the host's loop -----------------------------------------------------------------
    def _submit(self, coroutine: Any) -> bool:
        """Run ``coroutine`` on the host's loop; False (and not run) before ``start``."""
        loop = self._loop
        if loop is None:
            coroutine.close()
            return False
        asyncio.run_coroutine_threadsafe(coroutine, loop)
        return True

    def _set(self, server: _Server, state: State, message: str = "", tools: tuple[Tool, ...] = ()) -> None:
        server.tools = tools
        server.status = ServerStatus(
            server.name, state, server.settings.transport(), tuple(t.name for t in tools), message
        )
        with self._settled:
            self._settled.notify_all()
        for callback in self._listeners:
            with contextlib.suppress(Exception):
                callback()

    async def _launch(self, server: _Server) -> None:
        server.stop = asyncio.Event()
        server.task = asyncio.get_running_loop().create_task(self._serve(server, server.stop))

    async def _relaunch(self, server: _Server, *, enable: bool) -> None:
        await self._stop(server, quiet=enable)
        if enable:
            self._set(server, "starting")
            await self._launch(server)
        else:
            self._set(server, "disabled")

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(s) for s in self._servers.values()), return_exceptions=True)

    async def _stop(self, server: _Server, quiet: bool = False) -> None:
        if server.stop is not None:
            server.stop.set()
        if server.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(server.task, CLOSE_TIMEOUT_S)
        server.task = server.stop = server.session = None
        if not quiet and server.status.state in ("ready", "starting"):
            self._set(server, "stopped")

    async def _serve(self, server: _Server, stop: asyncio.Event) -> None:
        import anyio

        from backend.tools.mcp.session import open_session

        settings = server.settings
        try:
            async with contextlib.AsyncExitStack() as stack:
                errlog = self._errlog(stack, server.name)
                session = await open_session(stack, settings, errlog, server.faults.record)
                with anyio.fail_after(settings.timeout_s):
                    await server.faults.race(session.initialize())
                    listed = await server.faults.race(_list_all(session))
                names, renamed = offered_names(server.name, [t.name for t in listed])
                tools = tuple(
                    to_tool(server.name, t, self._caller(server, t.name), settings.timeout_s, names[t.name])
                    for t in {t.name: t for t in listed}.values()
                )
                server.session = session
                self._set(server, "ready", "; ".join(renamed), tools=tools)
                await stop.wait()
        except Exception as error:  # any failure of one server leaves the chat and the others running
            if stop.is_set():
                return
            if _holds(error, UnreadableAnswer):
                reason = f"{server.faults.reason}{self._see_log(server.name)}"
            elif _connection_lost(error):
                reason = f"it exited or closed the connection before it was ready{self._see_log(server.name)}"
            elif _holds(error, TimeoutError):
                reason = f"no answer within {settings.timeout_s:g} s (starting or listing its tools)"
            else:
                reason = _reason(error) + self._see_log(server.name)
            self._set(server, "failed", reason)
        finally:
            server.session = None

    def _caller(self, server: _Server, tool: str) -> Callable[..., Any]:
        def call(**arguments: Any) -> Any:
            return self.call(server.name, tool, arguments, server.settings.timeout_s)

        return call

    async def _call(self, server: _Server, tool: str, arguments: dict[str, Any]) -> Any:
        session = server.session
        if session is None or server.status.state != "ready":
            raise McpToolError(f"MCP server {server.name} is not running ({server.status.describe()}).")
        try:
            result = await server.faults.race(session.call_tool(tool, arguments))
        except UnreadableAnswer as error:
            raise McpToolError(f"MCP server {server.name} failed running {tool}: {error}") from None
        except Exception as error:
            reason = _reason(error)
            if _connection_lost(error):
                self._set(server, "failed", f"it stopped answering during {tool}: {reason}")
            raise McpToolError(f"MCP server {server.name} failed running {tool}: {reason}") from None
        return result_value(server.name, result)

    def _see_log(self, name: str) -> str:
        if self.log_dir is None or self._servers[name].settings.command is None:
            return ""
        return f" (its messages: {self.log_dir / f'mcp-{name}.log'})"

    def _errlog(self, stack: contextlib.AsyncExitStack, name: str) -> Any:
        import sys

        if self.log_dir is None:
            return sys.stderr
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return stack.enter_context((self.log_dir / f"mcp-{name}.log").open("a", encoding="utf-8"))


async def _list_all(session: Any) -> list[Any]:
    import mcp_types

    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is garbage
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        tools.extend(listed.tools)
        cursor = listed.next_cursor
        if not cursor:
            return tools
    raise McpToolError("its tool list never ended (100 pages)")


def _reason(error: BaseException) -> str:
    from pydantic import ValidationError

    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in error.exceptions[:3])
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        count = error.error_count()
        return f"its answer is not valid MCP ({count} problem(s), first at {where}: {first['msg']})"
    text = str(error) or type(error).__name__
    if isinstance(error, FileNotFoundError):
        return f"the command was not found ({text})"
    return text if len(text) <= 300 else text[:299] + "…"


def _holds(error: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return any(_holds(e, kind) for e in error.exceptions)
    return isinstance(error, kind)


def _connection_lost(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return any(_connection_lost(e) for e in error.exceptions)
    text = str(error).lower()
    return any(word in text for word in ("closed", "connection", "eof", "broken pipe", "terminated"))
