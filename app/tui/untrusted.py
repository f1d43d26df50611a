"""Text gemma-chat did not write, on the screen: the one place that makes it something Textual
draws exactly as it is.

A file name, a chat title, a server's error, an MCP tool's name or description, a model's tool
arguments can hold anything — ``[/]`` (Textual raises ``MarkupError`` and the app exits),
``[bold]`` (restyles the line), ``[@click=app.quit]`` (an action), ``[$var]``, escape sequences.
Every such text reaches a widget through one of these two, control characters made visible first
(``backend.terminal_text``):

- ``literal``: a ``Content`` Textual never parses — for anything that takes a visual (``Static``,
  ``Label``, ``Button``, ``Option``, a ``Collapsible`` title, a notice);
- ``escaped``: the text as Textual markup that reads back as itself, for the few places that take
  only a markup string (the command palette's titles and help lines) or where the app's own
  markup surrounds it. Every ``[`` is escaped (``\\[``); Textual's own ``escape`` misses ``[B]``,
  ``[$var]`` and a lone ``[/``.

The test walks every route with ``[/]``, ``[bold]`` and their kind (``tests/app/tui/test_untrusted_text.py``).
"""

from __future__ import annotations

from textual.content import Content

from backend.terminal_text import terminal_safe


def literal(text: str) -> Content:
    """``text`` as drawn content that is never read as markup."""
    return Content(terminal_safe(text))


def escaped(text: str) -> str:
    """``text`` as Textual markup that renders as ``text`` itself (controls made visible)."""
    return terminal_safe(text).replace("[", "\\[")
