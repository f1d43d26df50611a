"""The app's turns: sending the prompt (with its attachments), running a turn on one path or
both, Esc, regenerate, edit the last message, and thinking on or off for the chat."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from textual import work
from textual.containers import VerticalScroll

from app.tui import turn_runs
from app.tui.screens.approval import ApprovalScreen
from app.tui.screens.text_prompt import TextPromptScreen
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.status_bar import StatusBar
from backend.chat.conversation import Conversation
from backend.chat.pipeline import TurnOptions, TurnPipeline
from backend.config.settings import Settings
from backend.engine.protocol import SamplingSettings
from backend.engine.session.pool import EnginePool
from backend.errors import GemmaChatError
from backend.media.attachment import Attachment
from backend.tools.runner import ToolRunner


class TurnHost(Protocol):
    """What the turn actions need of the app they are mixed into."""

    settings: Settings
    pool: EnginePool
    path: str
    status: StatusBar
    turn: TurnPipeline | None
    compare_next: bool
    conversation: Conversation
    pending: list[Attachment]
    tools: ToolRunner | None
    screen: Any
    _shutting_down: bool

    @property
    def messages_view(self) -> VerticalScroll: ...
    @property
    def thinking(self) -> bool: ...
    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def query_one(self, selector: Any, expect_type: Any = ...) -> Any: ...
    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...
    def attach(self, path: Path) -> Any: ...
    def report_failure(self, what: str, error: Exception) -> str: ...
    def run_turn(self, turn: TurnPipeline, view: MessageView | CompareView) -> Any: ...
    def _tick(self) -> None: ...
    def _report_store(self) -> None: ...
    async def _pending_as_sent(self) -> bool: ...
    def _new_turn(self) -> TurnPipeline: ...
    def _turn_hooks(self) -> turn_runs.TurnHooks: ...
    async def _start_turn(self) -> None: ...
    async def _show_turn_error(self, view: MessageView | CompareView, text: str) -> None: ...
    async def _show_chat_turns(self) -> None: ...


class TurnActions:
    """Mixed into ``GemmaChatApp``."""

    turn: TurnPipeline | None
    pending: list[Attachment]

    def on_prompt_input_scroll_chat(self: TurnHost, message: PromptInput.ScrollChat) -> None:
        view = self.messages_view
        (view.scroll_page_up if message.pages < 0 else view.scroll_page_down)(animate=False)

    async def on_prompt_input_submitted(self: TurnHost, message: PromptInput.Submitted) -> None:
        if message.text.startswith("/attach "):
            self.query_one(PromptInput).clear()
            self.attach(Path(message.text.removeprefix("/attach ").strip()).expanduser())
            return
        if self.turn is not None:
            self.notify("A reply is still streaming: press Esc to stop it first.", severity="warning")
            return
        if self._shutting_down or not self.messages_view.is_attached:  # quitting, or not on screen yet
            self.notify("Not sent: the app is not ready for it; your message is kept.", severity="warning")
            return
        if refusal := turn_runs.size_refusal(message.text):  # a pasted megabyte: refused at once, kept
            return self.notify(refusal, severity="error", timeout=15)
        if not await self._pending_as_sent():
            return
        attachments = tuple(self.pending)
        self.turn = self._new_turn()  # busy from now on: no second send, Esc has a target
        try:
            self.conversation.add_user(message.text, attachments)
        except Exception:
            self.turn = None  # nothing was taken: the input and the attachments stay as they are
            raise
        self.query_one(PromptInput).clear()
        self.pending = []
        await self.query_one(AttachmentBar).show([])
        await self.messages_view.mount(MessageView("user", message.text, attachments=attachments))
        await self._start_turn()

    def _new_turn(self: TurnHost) -> TurnPipeline:
        options = TurnOptions(
            sampling=SamplingSettings(max_tokens=self.settings.max_tokens),
            trim_history=self.settings.trim_history,
            too_long_fix="Start a new chat (Ctrl+N), shorten the message, or set trim_history = true.",
            think=self.thinking,
        )
        return TurnPipeline(self.conversation, options, self.tools, self.settings.tools)

    def _turn_hooks(self: TurnHost) -> turn_runs.TurnHooks:
        def context_used(tokens: int) -> None:
            self.status.context_used = tokens

        return turn_runs.TurnHooks(lambda text, severity: self.notify(text, severity=severity), context_used)

    async def _start_turn(self: TurnHost) -> None:
        compare, self.compare_next = self.compare_next, False
        self.status.compare_next = False
        view: MessageView | CompareView = (
            CompareView() if compare else MessageView("assistant", path=self.path)
        )
        await self.messages_view.mount(view)
        self.messages_view.anchor()
        turn = self.turn = self.turn or self._new_turn()
        self.run_turn(turn, view)
        self._tick()

    @work(group="turn", exit_on_error=False, description="running the turn")
    async def run_turn(self: TurnHost, turn: TurnPipeline, view: MessageView | CompareView) -> None:
        hooks = self._turn_hooks()
        try:
            if isinstance(view, CompareView):
                await turn_runs.run_compare(turn, self.pool, view, self.conversation, hooks)
            else:
                await turn_runs.run_single(turn, self.pool, self.path, view, self.conversation, hooks)
        except GemmaChatError as error:  # refused before sending: back to the input, not in the history
            self.notify(str(error), severity="error", timeout=15)
            await self._show_turn_error(view, f"not sent: {error}")
            inputs = (self.query_one(PromptInput), self.query_one(AttachmentBar))
            self.pending = await turn_runs.give_back(self.conversation.withdraw_user(), *inputs, self.pending)
        except Exception as error:  # a bug: an error block, the log, and the app goes on
            message = self.report_failure("running the turn", error)
            await self._show_turn_error(view, f"{message} Your message is kept: Ctrl+R tries again.")
        finally:
            self.turn = None
            self._tick()
            self._report_store()

    async def _show_turn_error(self: TurnHost, view: MessageView | CompareView, text: str) -> None:
        if isinstance(view, MessageView):
            await view.fail(text)
        else:
            view.show_failure(text)

    async def action_stop(self: TurnHost) -> None:
        if self.turn is None:
            return
        if isinstance(self.screen, ApprovalScreen):
            self.screen.dismiss("deny")
        await self.turn.stop()

    @property
    def thinking(self: TurnHost) -> bool:
        """Whether this chat's turns ask for thinking (its own choice, else the setting)."""
        chosen = self.conversation.think
        return self.settings.think if chosen is None else chosen

    def action_toggle_think(self: TurnHost) -> None:
        self.conversation.think = not self.thinking
        self.status.think = self.thinking
        state = "on: the model thinks before it answers" if self.thinking else "off"
        self.notify(f"Thinking {state} (this chat).")

    async def action_regenerate(self: TurnHost) -> None:
        if self.turn is not None or not self.conversation.turns:
            return
        if self.conversation.pop_reply() is not None and self.messages_view.children:
            last = self.messages_view.children[-1]
            if isinstance(last, CompareView) or (isinstance(last, MessageView) and last.role != "user"):
                await last.remove()
        await self._start_turn()

    def action_edit_last(self: TurnHost) -> None:
        last = self.conversation.last_user_text()
        if last is None or self.turn is not None:
            return

        async def resend(text: str | None) -> None:
            if not text:
                return
            self.conversation.edit_last_user(text)
            await self._show_chat_turns()
            await self._start_turn()

        self.push_screen(TextPromptScreen("Edit your last message (the old branch is kept):", last), resend)
