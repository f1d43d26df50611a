"""What the process was started in, checked before any work: a locale whose character set is not
UTF-8 (every command's output then replaces what it cannot show; the chat window refuses, naming
the locale), and standard streams that are not a terminal (the chat window refuses: it would write
escape codes into a file and wait for keys from /dev/null for ever)."""

from __future__ import annotations

import codecs
import os
import sys
from typing import TextIO

from backend.errors import GemmaChatError

LOCALE_VARIABLES = ("LC_ALL", "LC_CTYPE", "LANG")
"""Where the C library finds the locale's character set, first set wins."""


def is_utf8(encoding: str | None) -> bool:
    try:
        return codecs.lookup(encoding or "ascii").name == "utf-8"
    except LookupError:
        return False


def tolerant_output() -> None:
    """Standard output and error write what their character set cannot show as ``?`` instead of
    raising (``ask``'s answer and progress in an ISO-8859-1 or ASCII locale)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if stream is not None and reconfigure is not None and not is_utf8(getattr(stream, "encoding", None)):
            reconfigure(errors="replace")


def locale_source() -> str:
    """The variable the character set came from (``LC_ALL=en_US.ISO-8859-1``), or the default."""
    for name in LOCALE_VARIABLES:
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    return "no LC_ALL, LC_CTYPE or LANG set"


def check_chat_terminal(stdin: TextIO | None = None, screen: TextIO | None = None) -> None:
    """Refuse the chat window where it cannot run: keys must come from a terminal (``stdin``) and
    it draws on standard error (``screen``), in UTF-8."""
    stdin = stdin if stdin is not None else sys.stdin
    screen = screen if screen is not None else sys.stderr
    missing = [
        name
        for name, stream in (("standard input", stdin), ("standard error", screen))
        if stream is None or not _is_terminal(stream)
    ]
    if missing:
        raise GemmaChatError(
            f"The chat window needs a terminal, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one (a file, a pipe or /dev/null).",
            "Run gemma-chat in a terminal, or use `gemma-chat ask PROMPT`, which reads and writes "
            "plain text anywhere.",
        )
    encoding = getattr(screen, "encoding", None)
    if not is_utf8(encoding):
        raise GemmaChatError(
            f"The terminal's character set is {encoding} ({locale_source()}): the chat window "
            "draws with UTF-8 characters, which it cannot show.",
            "Run it in a UTF-8 locale (e.g. LC_ALL=C.UTF-8 gemma-chat), or set PYTHONIOENCODING=utf-8 "
            "where the terminal shows UTF-8; `gemma-chat ask PROMPT` works in any locale.",
        )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed
        return False
