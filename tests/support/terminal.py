"""A program in a pseudo-terminal, read back as the text a person would see on the screen.

``pexpect`` runs the program on a pty; ``pyte`` (a VT100 emulator) turns what it draws into
lines of text. Keys are sent as the bytes a terminal sends for them. A thread drains the pty
as fast as the program writes (a terminal never makes a program wait); the emulator parses
what arrived only when the screen is looked at.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pexpect
import pyte

KEYS = {
    "enter": "\r",
    "escape": "\x1b",
    "f2": "\x1bOQ",
    "f3": "\x1bOR",
    "ctrl+c": "\x03",
    "ctrl+n": "\x0e",
    "ctrl+q": "\x11",
    "pageup": "\x1b[5~",
}


APP = [sys.executable, "-m", "app.cli", "--server", "http://127.0.0.1:9"]
"""The chat app with an engine that is never reached (nothing listens there): it starts at once."""


def reopened_chat(home: Path, reply: str) -> dict[str, str]:
    """A history under ``home`` whose last chat ends with ``reply`` (the app reopens it), and the
    app's environment: no local clipboard to fall back on, no tmux the test may run in."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    store = ChatStore(home / "data" / "history.db")
    chat = Conversation(store)
    chat.add_user("say something")
    chat.add_reply(reply, "optimized", None)
    store.close()
    env = {**os.environ, "GEMMA_CHAT_HOME": str(home), "TERM": "xterm-256color"}
    for name in ("TMUX", "TMUX_PANE", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    return env


class Terminal:
    def __init__(
        self, argv: Sequence[str], env: dict[str, str], cwd: str, cols: int = 120, rows: int = 40
    ) -> None:
        self.home = env.get("GEMMA_CHAT_HOME")
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(
            argv[0], list(argv[1:]), env=env, cwd=cwd, dimensions=(rows, cols), timeout=None
        )
        self._pending: list[bytes] = []
        self.received = bytearray()
        """Every byte the program wrote so far, as written (escape sequences the emulator drops)."""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.child.child_fd, 1 << 16)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._pending.append(data)

    def pump(self, seconds: float = 0.2) -> None:
        """Let the program run for ``seconds``, then parse what it drew."""
        time.sleep(seconds)
        with self._lock:
            data, self._pending = b"".join(self._pending), []
        if data:
            self.received += data
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, condition: str | Callable[[str], bool], timeout_s: float, what: str = "") -> str:
        """Pump until the screen shows ``condition`` (a regular expression, or a test of the text)."""
        test = condition if callable(condition) else lambda text: re.search(condition, text) is not None
        deadline = time.monotonic() + timeout_s
        while True:
            self.pump()
            text = self.text()
            if test(text):
                return text
            if time.monotonic() > deadline or not self.child.isalive():
                state = "the program exited" if not self.child.isalive() else f"{timeout_s:.0f} s passed"
                raise AssertionError(
                    f"{state} waiting for {what or condition!r}; the screen:\n{text}{self._log_tail()}"
                )

    def _log_tail(self, lines: int = 25) -> str:
        """The end of the newest engine log of the app's home (where the time went), if any."""
        if not self.home:
            return ""
        logs = sorted(Path(self.home, "cache", "logs").glob("*.log"), key=lambda p: p.stat().st_mtime)
        if not logs:
            return ""
        tail = logs[-1].read_text(errors="replace").splitlines()[-lines:]
        return f"\n-- the end of {logs[-1]}:\n" + "\n".join(tail)

    def type(self, text: str) -> None:
        self.child.send(text)
        time.sleep(0.3)

    def press(self, *keys: str) -> None:
        for key in keys:
            self.child.send(KEYS[key])
            time.sleep(0.3)

    def drag(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        """Press the left button at ``start`` (column, row from 0), move to ``end``, release there:
        a mouse selection, sent as SGR mouse reports (what Textual asks the terminal for)."""
        (x0, y0), (x1, y1) = start, end
        self.child.send(f"\x1b[<0;{x0 + 1};{y0 + 1}M")
        time.sleep(0.1)
        self.child.send(f"\x1b[<32;{x1 + 1};{y1 + 1}M")
        time.sleep(0.1)
        self.child.send(f"\x1b[<0;{x1 + 1};{y1 + 1}m")
        time.sleep(0.3)

    def find(self, text: str) -> tuple[int, int]:
        """Where ``text`` starts on the screen (column, row from 0)."""
        for row, line in enumerate(self.screen.display):
            if text in line:
                return line.index(text), row
        raise AssertionError(f"{text!r} is not on the screen:\n{self.text()}")

    def wait_exit(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while self.child.isalive() and time.monotonic() < deadline:
            self.pump()
        if self.child.isalive():
            self.child.kill(9)
            raise AssertionError(
                f"still running {timeout_s:.0f} s after quitting; the screen:\n{self.text()}"
            )
        self.child.close()
        return int(
            self.child.exitstatus
            if self.child.exitstatus is not None
            else 128 + (self.child.signalstatus or 0)
        )

    def close(self) -> None:
        if self.child.isalive():
            os.killpg(os.getpgid(self.child.pid), 9)
        self.child.close(force=True)
