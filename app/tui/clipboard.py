"""Where copied text goes: the terminal's clipboard and primary selection through OSC 52, and the
local copy commands that reach a clipboard where the terminal does not take OSC 52.

OSC 52 (``ESC ] 52 ; c ; BASE64 BEL``) asks the terminal itself to set a selection, so it works
over SSH; ``c`` is the clipboard (Ctrl+Shift+V), ``p`` the primary selection (the middle button).
Textual's ``App.copy_to_clipboard`` writes ``c`` only. Some terminals ignore OSC 52 (macOS
Terminal, many in their default settings), and tmux ignores it from the programs inside unless
``set-clipboard on`` — so where a local clipboard can be reached, the copy goes there too: tmux's
paste buffer (``tmux load-buffer -w``, which also hands it to the outer terminal where tmux may),
``wl-copy`` on Wayland, ``xclip`` or ``xsel`` on X11, ``pbcopy`` on macOS.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

OSC52_SELECTIONS = ("c", "p")
"""OSC 52's names for the clipboard and the primary selection, each written in its own sequence
(terminals that read one letter only take the first of ``cp``)."""
COMMAND_TIMEOUT_S = 3.0
"""How long a local copy command may take (``xclip`` forks to serve the selection and returns)."""


def osc52(text: str, selection: str = "c") -> str:
    """The sequence that sets the terminal's ``selection`` (``c`` or ``p``) to ``text``."""
    if selection not in OSC52_SELECTIONS:
        raise ValueError(f"OSC 52 selection {selection!r} is not one of {', '.join(OSC52_SELECTIONS)}")
    payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"\x1b]52;{selection};{payload}\a"


def osc52_both(text: str) -> str:
    """The sequences that set both the clipboard and the primary selection to ``text``."""
    return "".join(osc52(text, selection) for selection in OSC52_SELECTIONS)


@dataclass(frozen=True)
class CopyTarget:
    """A local place copied text goes, and the commands that reach it (the first that works)."""

    name: str
    """As a notice names it: ``tmux's buffer``, ``the clipboard``, ``the primary selection``."""
    commands: tuple[tuple[str, ...], ...]


def local_targets(
    env: Mapping[str, str], which: Callable[[str], str | None], platform: str
) -> list[CopyTarget]:
    """The local places a copy can reach from here (``env``: the environment, ``which``:
    ``shutil.which``, ``platform``: ``sys.platform``); empty over a bare SSH session."""
    targets: list[CopyTarget] = []
    if env.get("TMUX") and which("tmux"):  # tmux before 3.2 has no -w (hand it to the outer terminal)
        targets.append(
            CopyTarget("tmux's buffer", (("tmux", "load-buffer", "-w", "-"), ("tmux", "load-buffer", "-")))
        )
    for selection, wayland, xclip, xsel in (
        ("clipboard", ("wl-copy",), ("xclip", "-selection", "clipboard"), ("xsel", "--clipboard", "--input")),
        (
            "primary",
            ("wl-copy", "--primary"),
            ("xclip", "-selection", "primary"),
            ("xsel", "--primary", "--input"),
        ),
    ):
        commands: list[tuple[str, ...]] = []
        if env.get("WAYLAND_DISPLAY") and which("wl-copy"):
            commands.append(wayland)
        if env.get("DISPLAY"):
            commands += [c for c in (xclip, xsel) if which(c[0])]
        if platform == "darwin" and selection == "clipboard" and which("pbcopy"):
            commands.append(("pbcopy",))
        if commands:
            name = "the clipboard" if selection == "clipboard" else "the primary selection"
            targets.append(CopyTarget(name, tuple(commands)))
    return targets


def copy_locally(text: str, targets: list[CopyTarget]) -> list[str]:
    """Hand ``text`` to each target's first command that works; the names of those reached.
    Blocking: run it off the event loop."""
    reached = []
    data = text.encode("utf-8")
    for target in targets:
        for argv in target.commands:
            try:
                done = subprocess.run(
                    argv,
                    input=data,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=COMMAND_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                continue
            if done.returncode == 0:
                reached.append(target.name)
                break
    return reached
