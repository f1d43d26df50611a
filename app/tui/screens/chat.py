"""The chat app's own screen (the first on the stack; dialogs are pushed over it)."""

from __future__ import annotations

from textual.screen import Screen


class ChatScreen(Screen[None]):
    """The prompt has focus from the first frame: keys typed while the app starts (read from the
    terminal once it does) go to the prompt, not to the chat's scroll view, which would drop them.
    Dialogs keep Textual's default (their first focusable widget)."""

    AUTO_FOCUS = "#prompt"
