"""How large one message may be: a pasted megabyte held the app for minutes (laying it out, then
rendering and tokenizing it against a window it could never fit) and could not be quit meanwhile.
A message over the limit is refused at once, by size, and stays in the input."""

from __future__ import annotations

MAX_MESSAGE_CHARS = 512 * 1024
"""Characters in one message: about four characters a token fill Gemma 4's 128K-token window, so a
longer message cannot fit any Gemma 4 context."""


def too_long(chars: int) -> str:
    return (
        f"Not sent: the message is {chars:,} characters; at most {MAX_MESSAGE_CHARS:,} fit one message "
        "(Gemma 4's longest window, 128K tokens). Shorten it, or save it to a file and let a tool read "
        "the part you need. Your text stays in the input."
    )
