"""``GemmaChatApp``: the chat screen, with engines started in the background. It receives an
engine factory (``profile name -> Engine``): the vLLM one when run by ``gemma-chat``, a fake in UI
tests. Turns run in an async worker on the app's loop."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer

from app.tui import turns
from app.tui.attach_actions import AttachActions
from app.tui.branch_actions import BranchActions
from app.tui.chat_actions import EXPORTS, ChatActions
from app.tui.failures import ReportingApp
from app.tui.quit_actions import QuitActions
from app.tui.screens.approval import ApprovalScreen
from app.tui.screens.chat import ChatScreen
from app.tui.screens.help import HelpScreen
from app.tui.screens.text_prompt import TextPromptScreen
from app.tui.tool_actions import ToolActions
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.status_bar import StatusBar
from backend.chat.conversation import Conversation
from backend.chat.store import StoreError
from backend.chat.turn import TurnOptions, TurnPipeline
from backend.config.settings import Settings
from backend.engine.pool import EngineFactory, EnginePool, EngineState
from backend.engine.protocol import SamplingSettings
from backend.engine.server_http import remote_label
from backend.engine.swap import path_note
from backend.errors import GemmaChatError
from backend.media.attachment import Attachment

PATHS = ("optimized", "baseline")


class GemmaChatApp(QuitActions, BranchActions, ChatActions, AttachActions, ToolActions, ReportingApp):
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "gemma-chat"
    BINDINGS = [
        Binding("escape", "stop", "Stop", id="stop"),
        Binding("ctrl+c", "stop_or_quit", "Stop/Quit", show=False, priority=True, id="stop_or_quit"),
        Binding("f2", "toggle_path", "Path", id="toggle_path"),
        Binding("f3", "compare_next", "Compare", id="compare_next"),
        Binding("ctrl+n", "new_chat", "New chat", id="new_chat"),
        Binding("ctrl+l", "chats", "Chats", id="chats"),
        Binding("ctrl+r", "regenerate", "Regenerate", id="regenerate"),
        Binding("f4", "edit_last", "Edit last", id="edit_last"),
        # priority: over the prompt's own F6 (select line); in F1 and the palette, not the footer
        Binding("f6", "toggle_think", "Think", show=False, priority=True, id="toggle_think"),
        Binding("f9", "system_prompt", "System prompt", show=False, id="system_prompt"),
        Binding("f5", "copy_reply", "Copy reply", show=False, id="copy_reply"),
        Binding("f8", "copy_code", "Copy code", show=False, id="copy_code"),
        Binding("f7", "show_drafts", "Drafts", show=False, priority=True, id="show_drafts"),
        Binding("ctrl+o", "attach", "Attach", id="attach"),
        Binding("f1", "help", "Help", id="help"),
        Binding("ctrl+q", "quit", "Quit", priority=True, id="quit"),  # also over a dialog
    ]

    def __init__(
        self,
        settings: Settings,
        engine_factory: EngineFactory,
        model_name: str,
        log_path: Path | None = None,
        swapping: Callable[[], bool] | None = None,
    ) -> None:
        """``swapping``: whether the paths share the device by swapping engines (the memory plan's
        answer, asked off the event loop when the first engine starts)."""
        super().__init__(log_path)
        self.settings = settings
        self.pool = EnginePool(engine_factory, swapping, model=model_name)
        self.path: str = settings.profile  # optimized, baseline or eager (diagnosis)
        self.model_name = model_name
        self.compare_next = False
        self.turn: TurnPipeline | None = None
        """The turn running now (None: idle); the app takes no second turn while it runs."""
        self.pending: list[Attachment] = []
        self.store = self._open_store()
        self.conversation = Conversation(self.store)
        self._mcp_told: set[str] = set()
        self.mcp = self._mcp_host()
        self.tools = self._tool_runner()
        self.status = StatusBar(id="status")
        if settings.keymap:
            self.set_keymap(settings.keymap)

    def get_default_screen(self) -> Screen[None]:
        return ChatScreen(id="_default")

    def compose(self) -> ComposeResult:
        yield self.status
        yield VerticalScroll(id="messages")
        yield AttachmentBar(id="chips")
        yield PromptInput(id="prompt")
        yield Footer()

    async def on_mount(self) -> None:
        if self.settings.theme in self.available_themes:
            self.theme = self.settings.theme
        self.status.model, self.status.path = self.model_name, self.path
        self.status.think = self.thinking
        self.pool.listen(self._engine_changed)
        self.catch_signals()  # SIGTERM / SIGHUP / SIGINT quit as Ctrl+Q does, keeping the reply
        self.query_one(PromptInput).focus()
        self.start_engine(self.path)
        self._start_mcp()  # in the background, as the engine: the first paint waits for neither
        self.set_interval(1.0, self.guard("updating the status bar", self._tick))
        try:
            if self.store is not None and (last := self.store.last_chat()) is not None:
                await self._show_chat(last)
        except Exception as error:  # a history that cannot be read must not keep the app from starting
            self.report_failure("reopening your last chat", error)

    # -- engines --------------------------------------------------------------------------
    @work(group="engines", exit_on_error=False, description="starting the engine")
    async def start_engine(self, path: str) -> None:
        with contextlib.suppress(GemmaChatError):  # the state listener already shows the failure
            target = await self.pool.ensure(path)
            if self.pool.swapper is not None:
                await target.engine.start()  # swap mode: F2 swaps now (after a running turn)

    def _engine_changed(self, state: EngineState) -> None:
        if state.profile == self.path:
            self._tick()
        if state.stage == "failed":
            self.notify(f"{state.profile} engine: {state.detail}", severity="error", timeout=15)
        if state.info is not None:
            self.status.context_window = state.info.max_model_len
            if state.stage == "ready" and state.info.start_note:
                note = f"{state.profile} engine: {state.info.start_note}"
                self.notify(note, severity="warning", timeout=15)
            if state.stage == "ready" and state.info.engine_args.get("tokenizer_check"):
                server = state.info.engine_args.get("server")
                self.notify(f"{server} has no /tokenize: the check that it serves this model was skipped.")

    def _tick(self) -> None:
        state = self.pool.state(self.path)
        swapping = self.pool.swapper.activity if self.pool.swapper is not None else None
        if swapping:
            self.status.engine, self.status.engine_detail = "swapping", swapping
        elif state.stage == "starting" and state.started_at is not None:
            self.status.engine = state.elapsed_label(time.monotonic())
            self.status.engine_detail = state.detail
        elif state.stage == "failed":
            self.status.engine = "failed"
            self.status.engine_detail = "see the notice; Ctrl+P → restart engine"
        elif state.ready and self.turn is not None:
            self.status.engine, self.status.engine_detail = "replying", ""
        else:
            args = state.info.engine_args if state.info is not None else {}
            measured = (state.info.speculation if state.info else None, self.pool.swapper is not None)
            detail = remote_label(args) or path_note(state.profile, args, measured[1], measured[0])
            self.status.engine, self.status.engine_detail = state.stage, detail

    # -- chat display ------------------------------------------------------------------------
    @property
    def messages_view(self) -> VerticalScroll:
        return self.query_one("#messages", VerticalScroll)

    async def _show_chat(self, chat_id: int | None) -> None:
        try:
            self.conversation = Conversation(self.store, chat_id)
        except StoreError as error:  # a history that cannot be read: say so, start a new chat
            self.notify(str(error), severity="error", timeout=15)
            self.conversation = Conversation(self.store)
        if self.tools is not None:
            self.tools.always_allowed.clear()  # "always for this chat" ends with the chat
        await self._show_chat_turns()
        last = self.conversation.turns[-1].metrics if self.conversation.turns else None
        self.status.context_used = (last.prompt_tokens + last.generated_tokens) if last else 0
        self.sub_title = self.conversation.title
        self.status.think = self.thinking
        self.messages_view.scroll_end(animate=False)
        self.messages_view.anchor()  # long replies lay out after this: stay at the end as they do
        self._report_store()
        self.tell_branches()  # another window's turns, an edit's: a branch each, listed in Ctrl+P

    def _report_store(self) -> None:
        if self.conversation.last_store_error:
            self.notify(f"{self.conversation.last_store_error}", severity="error", timeout=10)

    # -- turns ---------------------------------------------------------------------------------
    def on_prompt_input_scroll_chat(self, message: PromptInput.ScrollChat) -> None:
        view = self.messages_view
        (view.scroll_page_up if message.pages < 0 else view.scroll_page_down)(animate=False)

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
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
        if refusal := turns.size_refusal(message.text):  # a pasted megabyte: refused at once, kept
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

    def _new_turn(self) -> TurnPipeline:
        options = TurnOptions(
            sampling=SamplingSettings(max_tokens=self.settings.max_tokens),
            trim_history=self.settings.trim_history,
            too_long_fix="Start a new chat (Ctrl+N), shorten the message, or set trim_history = true.",
            think=self.thinking,
        )
        return TurnPipeline(self.conversation, options, self.tools, self.settings.tools)

    def _turn_hooks(self) -> turns.TurnHooks:
        def context_used(tokens: int) -> None:
            self.status.context_used = tokens

        return turns.TurnHooks(lambda text, severity: self.notify(text, severity=severity), context_used)

    async def _start_turn(self) -> None:
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
    async def run_turn(self, turn: TurnPipeline, view: MessageView | CompareView) -> None:
        hooks = self._turn_hooks()
        try:
            if isinstance(view, CompareView):
                await turns.run_compare(turn, self.pool, view, self.conversation, hooks)
            else:
                await turns.run_single(turn, self.pool, self.path, view, self.conversation, hooks)
        except GemmaChatError as error:  # refused before sending: back to the input, not in the history
            self.notify(str(error), severity="error", timeout=15)
            await self._show_turn_error(view, f"not sent: {error}")
            inputs = (self.query_one(PromptInput), self.query_one(AttachmentBar))
            self.pending = await turns.give_back(self.conversation.withdraw_user(), *inputs, self.pending)
        except Exception as error:  # a bug: an error block, the log, and the app goes on
            message = self.report_failure("running the turn", error)
            await self._show_turn_error(view, f"{message} Your message is kept: Ctrl+R tries again.")
        finally:
            self.turn = None
            self._tick()
            self._report_store()

    async def _show_turn_error(self, view: MessageView | CompareView, text: str) -> None:
        if isinstance(view, MessageView):
            await view.fail(text)
        else:
            view.show_failure(text)

    async def action_stop(self) -> None:
        if self.turn is None:
            return
        if isinstance(self.screen, ApprovalScreen):
            self.screen.dismiss("deny")
        await self.turn.stop()

    def action_toggle_path(self) -> None:
        self.path = PATHS[(PATHS.index(self.path) + 1) % len(PATHS)] if self.path in PATHS else PATHS[0]
        self.status.path = self.path
        self.notify(f"Next turns run on the {self.path} path.")
        if not self.pool.state(self.path).ready:
            self.start_engine(self.path)
        self._tick()

    @property
    def thinking(self) -> bool:
        """Whether this chat's turns ask for thinking (its own choice, else the setting)."""
        chosen = self.conversation.think
        return self.settings.think if chosen is None else chosen

    def action_toggle_think(self) -> None:
        self.conversation.think = not self.thinking
        self.status.think = self.thinking
        state = "on: the model thinks before it answers" if self.thinking else "off"
        self.notify(f"Thinking {state} (this chat).")

    def action_compare_next(self) -> None:
        self.compare_next = not self.compare_next
        self.status.compare_next = self.compare_next
        if self.compare_next and self.pool.swapper is None:  # swapping: each path swaps in for its half
            for path in PATHS:
                if not self.pool.state(path).ready:
                    self.start_engine(path)

    async def action_regenerate(self) -> None:
        if self.turn is not None or not self.conversation.turns:
            return
        if self.conversation.pop_reply() is not None and self.messages_view.children:
            last = self.messages_view.children[-1]
            if isinstance(last, CompareView) or (isinstance(last, MessageView) and last.role != "user"):
                await last.remove()
        await self._start_turn()

    def action_edit_last(self) -> None:
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

    async def _show_chat_turns(self) -> None:
        await self.messages_view.remove_children()
        await self.messages_view.mount_all([turns.turn_view(t) for t in self.conversation.turns])

    def action_help(self) -> None:
        rows = [(b.key, f"{b.description} (id: {b.id})") for b in self.BINDINGS if b.id]
        rows += [
            ("Enter", "send"),
            ("Shift+Enter / Ctrl+J", "new line"),
            ("PageUp / PageDown", "scroll the chat (back at its end, it follows the reply again)"),
            ("Ctrl+P", "command palette"),
            ("Ctrl+P → Branch", "show another branch of this chat (an edit's, another window's)"),
        ]
        self.push_screen(HelpScreen(rows))

    @work(group="engines", exit_on_error=False, description="restarting the engine")
    async def restart_engine(self) -> None:
        await self.pool.discard(self.path, "restarting")
        with contextlib.suppress(GemmaChatError):  # the state listener shows the failure
            await self.pool.ensure(self.path)

    def palette_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().palette_commands(screen)
        yield SystemCommand(
            "Toggle path", "Switch between the optimized and the baseline path", self.action_toggle_path
        )
        yield SystemCommand("Compare next turn", "Run the next turn on both paths", self.action_compare_next)
        yield SystemCommand(
            "Toggle thinking", "Gemma 4's thinking mode for this chat (F6)", self.action_toggle_think
        )
        yield SystemCommand("New chat", "Start a new chat", self.action_new_chat)
        yield SystemCommand("Chats", "Switch, search, rename or delete chats", self.action_chats)
        yield SystemCommand("Regenerate", "Answer the last message again", self.action_regenerate)
        yield SystemCommand(
            "Edit last message", "Edit and resend; the old branch is kept", self.action_edit_last
        )
        yield SystemCommand("System prompt", "Set this chat's system prompt", self.action_system_prompt)
        yield SystemCommand("Copy reply", "Copy the last reply", self.action_copy_reply)
        yield SystemCommand("Copy code block", "Copy the last reply's last code block", self.action_copy_code)
        for title, what, kind in EXPORTS:
            yield SystemCommand(title, what, partial(self.try_export, kind))
        yield SystemCommand("Restart engine", "Restart the active path's engine", self.restart_engine)
        yield SystemCommand(
            "Tool approval", "Cycle: ask for side effects / every call / never", self.action_tool_policy
        )
        yield SystemCommand("Tools", "List the tools the model may call", self.action_list_tools)
        yield from self.mcp_commands()
        yield from self.branch_commands()

    async def on_unmount(self) -> None:
        """However the app ends (quit, a fatal error, a test's exit): no MCP server outlives it."""
        await self._close_mcp()
