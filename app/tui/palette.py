"""What the command palette (Ctrl+P) offers and what F1 lists: one table of entries beside the
key bindings, so the two never disagree on what the app can do."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from app.tui.actions.chat import EXPORTS


@dataclass(frozen=True)
class Entry:
    """A palette entry: its title, what it does, and the app's method it calls (``action_*`` or
    another method of the app; ``argument``, where given, is passed to it)."""

    title: str
    help: str
    method: str
    argument: str | None = None


ENTRIES: tuple[Entry, ...] = (
    Entry("Toggle path", "Switch between the optimized and the baseline path", "action_toggle_path"),
    Entry("Compare next turn", "Run the next turn on both paths", "action_compare_next"),
    Entry("Toggle thinking", "Gemma 4's thinking mode for this chat (F6)", "action_toggle_think"),
    Entry("New chat", "Start a new chat", "action_new_chat"),
    Entry("Chats", "Switch, search, rename or delete chats", "action_chats"),
    Entry("Regenerate", "Answer the last message again", "action_regenerate"),
    Entry("Edit last message", "Edit and resend; the old branch is kept", "action_edit_last"),
    Entry("System prompt", "Set this chat's system prompt", "action_system_prompt"),
    Entry("Copy reply", "Copy the last reply", "action_copy_reply"),
    Entry("Copy code block", "Copy the last reply's last code block", "action_copy_code"),
    *(Entry(title, what, "try_export", kind) for title, what, kind in EXPORTS),
    Entry("Restart engine", "Restart the active path's engine", "restart_engine"),
    Entry("Tool approval", "Cycle: ask for side effects / every call / never", "action_tool_policy"),
    Entry("Tools", "List the tools the model may call", "action_list_tools"),
)
"""The app's own entries, in the palette's order (MCP servers' and the chat's branches follow)."""


KEYS_BESIDE_BINDINGS: tuple[tuple[str, str], ...] = (
    ("Enter", "send"),
    ("Shift+Enter / Ctrl+J", "new line"),
    ("PageUp / PageDown", "scroll the chat (back at its end, it follows the reply again)"),
    ("Ctrl+P", "command palette"),
    ("Ctrl+P → Branch", "show another branch of this chat (an edit's, another window's)"),
)


def help_rows(bindings: list[Binding]) -> list[tuple[str, str]]:
    """F1's rows: every binding with an id (its key, what it does, the id a keymap names), then the
    keys the prompt and the palette handle themselves."""
    rows = [(b.key, f"{b.description} (id: {b.id})") for b in bindings if b.id]
    return rows + list(KEYS_BESIDE_BINDINGS)
