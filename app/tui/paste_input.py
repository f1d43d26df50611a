"""A paste holding escape sequences arrives whole, in order, as text.

Textual's terminal parser treats an ``ESC`` inside a bracketed paste as the start of a key
sequence: what follows it is sent at once as key presses (the ``ESC`` itself as ``^``) while the
text before it waits for the paste's end — so pasting ``first\\x1b[31mred\\x1b[0m last`` typed
``^[31mred^[0m last`` ahead of ``first``. ``PasteSafeParser`` holds a bracketed paste until its
end marker and hands the parser the paste without any ``ESC`` in it (``pasted_text``: colour and
cursor sequences dropped, other control characters made visible), so only the end marker ends
it. ``install`` makes Textual's Linux driver read keys with it (the driver builds its parser by
that module-level name; Textual is pinned exactly). A paste that reaches the prompt another way
is cleaned the same way there (``PromptInput``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from textual._xterm_parser import XTermParser
from textual.message import Message

from backend.terminal_text import terminal_safe

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
HELD_S = 0.2
"""How long the start of a key sequence that may begin a paste waits for the rest of it."""
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: a title, a hyperlink, the clipboard
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC
    r"|\x1b[@-Z\\-_]"  # two-character escapes
)


def pasted_text(text: str) -> str:
    """A paste as text: escape sequences (terminal formatting, not text) dropped, line ends made
    newlines, any other control character shown as its picture (``backend.terminal_text``)."""
    text = _SEQUENCE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return terminal_safe(text)


class PasteSafeParser(XTermParser):
    """Textual's parser, with each bracketed paste held until its end marker and cleaned."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._paste: list[str] | None = None
        """The paste so far, while one is open."""
        self._held = ""
        """The end of the last chunk, where it may begin a paste's start or end marker."""
        self._held_at = 0.0

    def tick(self) -> Iterable[Message]:
        """Textual's timeouts; a held start that no paste followed goes on as keys."""
        if self._held and self._paste is None and time.monotonic() - self._held_at > HELD_S:
            held, self._held = self._held, ""
            yield from super().feed(held)
        yield from super().tick()

    def feed(self, data: str) -> Iterable[Message]:
        if not data:  # the end of input: a paste left open goes in as it is
            if self._paste is not None:
                tail = pasted_text("".join(self._paste) + self._held)
                self._paste, self._held = None, ""
                yield from super().feed(tail + PASTE_END) if tail else ()
            yield from super().feed("")
            return
        passed = self._pass(data)
        if passed:
            yield from super().feed(passed)

    def _pass(self, data: str) -> str:
        """What of ``data`` the parser gets now: everything outside a paste, each whole paste."""
        text, out = self._held + data, []
        self._held = ""
        while text:
            if self._paste is None:
                start = text.find(PASTE_START)
                if start < 0:  # a paste's start marker split across reads waits for its rest
                    keep = _marker_prefix(text, PASTE_START)
                    keep = keep if keep >= 2 else 0  # a lone ESC is the Esc key: never held
                    out.append(text[: len(text) - keep])
                    self._held, self._held_at = text[len(text) - keep :], time.monotonic()
                    break
                out.append(text[: start + len(PASTE_START)])
                text, self._paste = text[start + len(PASTE_START) :], []
                continue
            end = text.find(PASTE_END)
            if end < 0:
                keep = _marker_prefix(text, PASTE_END)
                self._paste.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            self._paste.append(text[:end])
            out.append(pasted_text("".join(self._paste)) + PASTE_END)
            text, self._paste = text[end + len(PASTE_END) :], None
        return "".join(out)


def _marker_prefix(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` begin ``marker`` (to wait for the rest)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


def install() -> None:
    """Textual's Linux driver reads its input with ``PasteSafeParser``."""
    from textual.drivers import linux_driver

    linux_driver.XTermParser = PasteSafeParser  # type: ignore[misc]
