"""Every way out of the app keeps what was generated: Ctrl+Q, SIGTERM, SIGHUP and SIGINT all go
through ``shut_down``, which stops the turn in progress (a tool-approval dialog open or not),
saves its partial reply to the history marked ``stopped``, shuts the engines and MCP servers
down, then exits — so Textual restores the terminal (alternate screen, mouse reporting).

A second signal while shutting down exits at once (the CLI still ends every child process).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Protocol

from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from backend.chat.conversation import Conversation
from backend.chat.pipeline import TurnPipeline
from backend.engine.session.pool import EnginePool

SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT"}
STOP_TIMEOUT_S = 5.0
"""How long the turn in progress gets to stop before its partial reply is saved anyway."""


class QuitHost(Protocol):
    turn: TurnPipeline | None
    conversation: Conversation
    pool: EnginePool
    path: str
    workers: Any
    screen_stack: list[Any]
    is_running: bool
    _shutting_down: bool
    _quit_task: asyncio.Future[None] | None

    @property
    def messages_view(self) -> Any: ...
    def exit(self) -> None: ...
    def _on_signal(self, name: str) -> None: ...
    async def _close_mcp(self) -> None: ...
    async def _stop_turn_for_quit(self) -> TurnPipeline | None: ...
    def _save_partial(self, turn: TurnPipeline, reason: str) -> None: ...
    async def shut_down(self, reason: str) -> None: ...
    async def action_stop(self) -> None: ...
    def copy_selection(self) -> bool: ...


class QuitActions:
    """Mixed into ``GemmaChatApp``."""

    _shutting_down = False
    _quit_task: asyncio.Future[None] | None = None

    async def action_quit(self: QuitHost) -> None:
        await self.shut_down("Ctrl+Q")

    async def action_stop_or_quit(self: QuitHost) -> None:
        """Ctrl+C: copy the selected text where there is some (``CopyActions``); else stop the
        reply in progress, or quit when there is none."""
        if self.copy_selection():
            return
        if self.turn is not None:
            await self.action_stop()
        else:
            await self.shut_down("Ctrl+C")

    def catch_signals(self: QuitHost) -> None:
        """SIGTERM, SIGHUP and SIGINT quit the app as Ctrl+Q does (the terminal is restored), and
        within ``exit_deadline.DEADLINE_S`` even where the loop is held by other work."""
        from app.tui import exit_deadline

        def terminal_mode() -> Any:
            return getattr(getattr(self, "_driver", None), "attrs_before", None)

        exit_deadline.install(SIGNALS, self._on_signal, lambda: bool(self.is_running), terminal_mode)

    def _on_signal(self: QuitHost, name: str) -> None:
        if self._shutting_down:
            self.exit()
            return
        self._quit_task = asyncio.ensure_future(self.shut_down(name))

    async def shut_down(self: QuitHost, reason: str) -> None:
        """Stop and save the turn in progress, end engines and MCP servers, exit."""
        if self._shutting_down:
            return
        self._shutting_down = True
        try:
            turn = await self._stop_turn_for_quit()
            if turn is not None:
                self._save_partial(turn, reason)
            await asyncio.gather(self.pool.shutdown(), self._close_mcp(), return_exceptions=True)
        finally:
            from app.tui import exit_deadline

            exit_deadline.disarm()  # the loop did it in time
            self.exit()

    async def _stop_turn_for_quit(self: QuitHost) -> TurnPipeline | None:
        """The turn that was running, stopped (its worker cancelled, a dialog it waits on closed)."""
        turn = self.turn
        if turn is None:
            return None
        from app.tui.screens.approval import ApprovalScreen

        for screen in reversed(self.screen_stack):
            if isinstance(screen, ApprovalScreen):
                screen.dismiss("deny")
        self.workers.cancel_group(self, "turn")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_TIMEOUT_S
        while self.turn is not None and loop.time() < deadline:
            await asyncio.sleep(0.02)
        return turn

    def _save_partial(self: QuitHost, turn: TurnPipeline, reason: str) -> None:
        """The reply on screen, saved as ``stopped`` unless the turn saved a reply itself."""
        if not self.conversation.turns or self.conversation.turns[-1].role != "user":
            return  # the turn ended (and saved its reply) before it could be stopped
        views = [v for v in self.messages_view.children if isinstance(v, MessageView | CompareView)]
        last = views[-1] if views else None
        panes: list[MessageView] = []
        if isinstance(last, CompareView):
            panes = [last.panes["optimized"], last.panes["baseline"]]
        elif isinstance(last, MessageView) and last.role != "user":
            panes = [last]
        for view in panes:
            path = view.path or self.path
            kept = turn.history_extra(path)
            if view.text or view.thought.text or kept.get("tools"):  # a reply of tool calls only counts
                extra = {"status": "stopped", "stopped_by": reason, **kept}
                if view.thought.text:
                    extra["thought"] = view.thought.text
                self.conversation.add_reply(view.text, path, view.metrics, extra)
                return
