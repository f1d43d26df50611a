"""``GemmaChatApp``: the chat screen, with engines started in the background — the app's state,
its bindings and layout, the table of contents of what it does (``app.tui.actions``) and offers
(``app.tui.palette``). It receives an engine factory (``path name -> Engine``): the vLLM one when
run by ``gemma-chat``, a fake in UI tests. Turns run in an async worker on the app's loop."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.driver import Driver
from textual.screen import Screen
from textual.widgets import Footer

from app.tui import graphics, palette, paste_input
from app.tui.actions.attach import AttachActions
from app.tui.actions.branch import BranchActions
from app.tui.actions.chat import ChatActions
from app.tui.actions.copy import CopyActions
from app.tui.actions.earlier import EarlierActions
from app.tui.actions.engines import EngineActions
from app.tui.actions.quit import QuitActions
from app.tui.actions.send import TurnActions
from app.tui.actions.tools import ToolActions
from app.tui.failures import ReportingApp
from app.tui.screens.chat import ChatScreen
from app.tui.screens.help import HelpScreen
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.status_bar import StatusBar
from backend.chat.conversation import Conversation
from backend.chat.pipeline import TurnPipeline
from backend.chat.store import StoreError
from backend.config.settings import Settings
from backend.engine.session.pool import EngineFactory, EnginePool
from backend.media.attachment import Attachment


class GemmaChatApp(
    TurnActions,
    EarlierActions,
    EngineActions,
    QuitActions,
    BranchActions,
    ChatActions,
    AttachActions,
    ToolActions,
    CopyActions,
    ReportingApp,
):
    """The app's state and its screen; what it does is in its mixins (``app.tui.actions``: turns,
    engines, quitting, branches, chats, attachments, tools, copying) and what it offers in
    ``app.tui.palette``."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "gemma-chat"
    BINDINGS = [
        Binding("escape", "stop", "Stop", id="stop"),
        Binding("ctrl+c", "stop_or_quit", "Copy/Stop/Quit", show=False, priority=True, id="stop_or_quit"),
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
        self.path: str = settings.path  # optimized, baseline or eager (diagnosis)
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
        self.graphics = graphics.detect()
        """How this terminal draws pictures (attachments): Kitty graphics or half-blocks."""
        if settings.keymap:
            self.set_keymap(settings.keymap)

    def get_driver_class(self) -> type[Driver]:
        paste_input.install()  # a paste holding escape sequences arrives whole, in order, as text
        return super().get_driver_class()

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

    def action_help(self) -> None:
        self.push_screen(HelpScreen(palette.help_rows(self.BINDINGS)))

    def palette_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().palette_commands(screen)
        for entry in palette.ENTRIES:
            method = getattr(self, entry.method)
            call = method if entry.argument is None else partial(method, entry.argument)
            yield SystemCommand(entry.title, entry.help, call)
        yield from self.mcp_commands()
        yield from self.branch_commands()

    async def on_unmount(self) -> None:
        """However the app ends (quit, a fatal error, a test's exit): no MCP server outlives it."""
        await self._close_mcp()
