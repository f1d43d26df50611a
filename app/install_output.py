"""What a person sees of an installer's output: progress, not the list of every package.

Standard library only: this module runs before anything is installed.

* pip (and uv off a terminal): its output is read line by line and condensed: each download of at
  least ``BIG_DOWNLOAD_MB`` with its size and how many packages were collected so far, the install
  phase, uv's summary lines (resolved, prepared, installed), errors and warnings; the rest (every
  ``Collecting``, every ``+ package==version``, a machine's ignored local index folders) is dropped.
  After ``QUIET_S`` without a line (pip unpacking, uv downloading), a line says it is still going.
* uv on a terminal: it runs on a pseudo-terminal of this terminal's size, so it draws its progress
  bars (each download, its bytes so far and in all, packages done of all); its output is passed
  through as it comes, but for the lines of its final list of packages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence

BIG_DOWNLOAD_MB = 10.0
"""pip's downloads at least this large get a line of their own."""
TAIL_LINES = 25
"""The last lines kept, to show when an install fails."""
QUIET_S = 30.0
"""After this long without a line shown, a line says the install is still going, and for how long."""


def run_condensed(command: Sequence[str]) -> tuple[int, list[str]]:
    """Run ``command`` with its output condensed; returns its exit status and its last lines."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    counts = {"collected": 0}
    began = time.monotonic()
    last_shown = [began]
    done = threading.Event()

    def show(text: str) -> None:
        last_shown[0] = time.monotonic()
        print(f"  {text}", file=sys.stderr, flush=True)

    def still_going() -> None:
        while not done.wait(QUIET_S / 3):
            if time.monotonic() - last_shown[0] >= QUIET_S:
                show(f"... still going ({time.monotonic() - began:.0f} s so far)")

    threading.Thread(target=still_going, daemon=True).start()
    try:
        with subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as process:
            for raw in process.stdout or ():  # a pipe: always there
                line = raw.rstrip()
                if not line or line.startswith("WARNING: Location"):
                    continue
                tail.append(line)
                shown = progress_line(line, counts)
                if shown:
                    show(shown)
    finally:
        done.set()
    return process.returncode, list(tail)


_PIP_DOWNLOAD = re.compile(r"^\s*Downloading (\S+?)(?:-\d[^ ]*)? \(([\d.]+) (kB|MB|GB)\)")
_SUMMARY = re.compile(r"^(Resolved|Prepared|Installed|Uninstalled|Audited) \d+ packages?")
_LISTED = re.compile(r"^\s*[+\-~] \S")


def progress_line(line: str, counts: dict[str, int]) -> str | None:
    """What of one line of pip's or uv's output a person sees (None: nothing).

    pip: each download of at least ``BIG_DOWNLOAD_MB`` with its size and how many packages were
    collected so far, then the install phase; uv: its summary lines (resolved, prepared, installed),
    not the list of every package. Errors and warnings always show."""
    if line.startswith("Collecting "):
        counts["collected"] = counts.get("collected", 0) + 1
        return None
    download = _PIP_DOWNLOAD.match(line)
    if download:
        name, size, unit = download.groups()
        megabytes = float(size) * {"kB": 0.001, "MB": 1.0, "GB": 1000.0}[unit]
        if megabytes < BIG_DOWNLOAD_MB:
            return None
        return f"downloading {name} ({size} {unit}); {counts.get('collected', 0)} packages collected so far"
    if line.startswith("Installing collected packages:"):
        names = line.split(":", 1)[1].split(",")
        return f"installing {len(names)} packages (unpacking; no output until it ends)"
    if line.startswith("Successfully installed"):
        return f"installed {len(line.split()) - 2} packages"
    if _SUMMARY.match(line):
        return line
    if _LISTED.match(line):
        return None
    lowered = line.lower()
    if lowered.startswith(("error", "warning", "×", "╰─▶", "hint")) or "error:" in lowered:
        return line
    return None


_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
_MAYBE_LISTED = re.compile(r"^\s*([+\-~]( \S*)?)?$")


def visible(data: bytes) -> str:
    """The text of terminal output without its control sequences."""
    return _ESCAPES.sub("", data.decode("utf-8", "replace"))


class ListFilter:
    """Passes terminal output through as it comes, without the lines of uv's list of packages.

    A partial line is held back only while it could still become such a line."""

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        self.pending += data
        out = b""
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            if not _LISTED.match(visible(line)):
                out += line + b"\n"
        if not _MAYBE_LISTED.match(visible(self.pending)):
            out, self.pending = out + self.pending, b""
        return out

    def end(self) -> bytes:
        rest, self.pending = self.pending, b""
        return b"" if _LISTED.match(visible(rest)) else rest


def run_on_terminal(command: Sequence[str]) -> int:
    """Run ``command`` on a pseudo-terminal the size of this one, its output filtered
    (:class:`ListFilter`) onto this terminal; returns its exit status."""
    import fcntl
    import pty
    import termios

    try:
        leader, follower = pty.openpty()
    except OSError:
        return subprocess.call(list(command))
    try:
        size = fcntl.ioctl(sys.stderr.fileno(), termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(follower, termios.TIOCSWINSZ, size)
    except OSError:
        pass
    with subprocess.Popen(
        list(command), stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    ) as process:
        os.close(follower)
        shown, out = ListFilter(), sys.stderr.buffer
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the pty ends with EIO once uv has exited
                break
            if not data:
                break
            out.write(shown.feed(data))
            out.flush()
        out.write(shown.end())
        out.flush()
        os.close(leader)
    return process.returncode
