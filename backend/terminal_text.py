"""Text from a model, a tool or a server made safe for a terminal: the one sanitizer that ``ask``
and the chat app put every such text through before it is drawn.

A reply can hold anything a model was trained on or a server sends — ``ESC ] 52`` (write the
clipboard), ``ESC ] 0`` (the window title), ``ESC [ 2 J`` (clear the screen), a lone carriage
return (overwrite the line). Written raw, those act on the user's terminal. Here every control
character except newline and tab is made visible as its Unicode control picture (``ESC`` → ``␛``,
``BEL`` → ``␇``) or, for C1 controls (U+0080–U+009F, which some terminals obey as ``ESC x``), as
``<U+009B>``; a carriage return before a newline is dropped (Windows line ends read as plain ones).
A made-visible ``ESC`` leaves the rest of the sequence as ordinary text, so nothing is acted on,
and the reader still sees that something was there. Stateless per character, so a stream can be
made safe chunk by chunk.
"""

from __future__ import annotations

import re

CONTROL = re.compile("\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
KEPT = {"\r\n": "\n"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in KEPT:
        return KEPT[char]
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␛ for ESC)
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab made visible."""
    if not CONTROL.search(text):
        return text
    return CONTROL.sub(_visible, text)
