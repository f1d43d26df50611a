"""Streaming a reply into a Markdown widget without letting the re-rendering take over a core.

Textual's ``Markdown.append`` re-parses and re-renders the document's last block each time; while
a reply grows one block (a code fence, a long run of lines) that block is the whole reply, so each
append, and the painting after it, costs more than the one before. Textual's own ``MarkdownStream``
appends again as soon as the previous append ends: the app then renders flat out, and the cost of
showing a reply grows with the square of its length. Measured on a 2-core AMD EPYC (avx2 avx512f
avx512_bf16), 4,000 four-character fragments of a Python fence arriving about 400 a second: 3.4 CPU
seconds for the first 500 fragments, 46.7 for the last 500, 172 s until all were shown.

This stream appends what arrived since the last append, waits until the screen has been painted,
then pauses in proportion to what that cycle took (``pause_after``): rendering keeps to about a
quarter of one core however long the block grows (the same fence: 0.25 CPU s for the first 500
fragments, 0.41-0.53 for the last, all shown 15 s after the start), and the screen follows the
reply several times a second. The whole text is rendered once when the reply ends
(``MessageView.finish``), so nothing a pause held back is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from textual.widgets import Markdown

RENDER_SHARE = 0.25
"""The share of one core a streaming reply's re-rendering may take, on average."""
MIN_PAUSE_S = 0.05
"""The shortest pause between two appends (at most 20 re-renders a second)."""
PAINT_WAIT_S = 1.0
"""The longest wait for the screen to be painted after an append (a widget no longer shown)."""


def pause_after(spent_s: float, share: float = RENDER_SHARE, least_s: float = MIN_PAUSE_S) -> float:
    """The pause after an append whose cycle (the append and the painting) took ``spent_s``:
    rendering gets ``share`` of the time."""
    return max(least_s, spent_s * (1.0 - share) / share)


class ThrottledMarkdownStream:
    """Appends fragments to one Markdown widget, one append at a time, a ``pause_after`` its cycle
    between two."""

    def __init__(self, widget: Markdown) -> None:
        self.widget = widget
        self._pending: list[str] = []
        self._arrived = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.appends = 0
        """How many appends have been made (each one re-renders the widget's last block)."""

    def write(self, fragment: str) -> None:
        """Queue ``fragment``; it is appended with whatever else arrives before the next append."""
        if not fragment or self._stopping.is_set():
            return
        self._pending.append(fragment)
        self._arrived.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            if self._stopping.is_set():  # ``stop`` sets both
                return
            self._arrived.clear()
            text = "".join(self._pending)
            self._pending.clear()
            started = time.monotonic()
            await self.widget.append(text)
            self.appends += 1
            await self._painted()
            cycle_s = time.monotonic() - started
            with contextlib.suppress(TimeoutError):  # the pause ends early when the stream stops
                await asyncio.wait_for(self._stopping.wait(), pause_after(cycle_s))

    async def _painted(self) -> None:
        """Wait until the screen has been painted with the append (its layout and rendering cost
        more than the append itself: for a long code fence, the highlighting), or a second passed."""
        painted = asyncio.Event()
        self.widget.call_after_refresh(painted.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(painted.wait(), PAINT_WAIT_S)

    async def stop(self) -> None:
        """Stop after the append under way (if any); fragments still queued are dropped, because
        the caller renders the whole text next."""
        self._stopping.set()
        self._arrived.set()
        if self._task is not None:
            await self._task
            self._task = None
        self._pending.clear()
