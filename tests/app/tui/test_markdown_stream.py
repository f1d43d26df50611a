"""A streaming reply's re-rendering: one append at a time, what arrived meanwhile coalesced, a pause
after each append in proportion to what it cost, and the whole text on screen when the reply ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown
from textual.widgets._markdown import MarkdownFence

from app.tui.widgets.markdown_stream import MIN_PAUSE_S, RENDER_SHARE, ThrottledMarkdownStream, pause_after
from app.tui.widgets.message_view import MessageView


class SlowWidget(Markdown):
    """A Markdown stand-in whose append takes ``cost_s`` and records when it ran and what it got."""

    def __init__(self, cost_s: float) -> None:
        super().__init__()
        self.cost_s = cost_s
        self.got: list[str] = []
        self.spans: list[tuple[float, float]] = []
        self.running = 0
        self.most_running = 0

    async def append(self, markdown: str) -> None:  # type: ignore[override]
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        started = time.monotonic()
        await asyncio.sleep(self.cost_s)
        self.got.append(markdown)
        self.spans.append((started, time.monotonic()))
        self.running -= 1

    def call_after_refresh(self, callback: Callable[..., object], *args: object, **kwargs: object) -> bool:
        callback()  # no screen: painted at once
        return True


def test_the_pause_gives_rendering_its_share() -> None:
    assert pause_after(0.1) == 0.1 * (1 - RENDER_SHARE) / RENDER_SHARE
    cost = 0.4
    assert cost / (cost + pause_after(cost)) == RENDER_SHARE
    assert pause_after(0.0) == MIN_PAUSE_S


async def test_fragments_that_arrive_during_an_append_go_in_the_next_one_in_order() -> None:
    widget = SlowWidget(cost_s=0.1)
    stream = ThrottledMarkdownStream(widget)
    fragments = [f"part {i} " for i in range(40)]
    for fragment in fragments:
        stream.write(fragment)
        await asyncio.sleep(0.01)
    while "".join(widget.got) != "".join(fragments):
        await asyncio.sleep(0.05)
    await stream.stop()
    assert widget.most_running == 1, "never two appends at once"
    assert len(widget.got) < len(fragments) / 2, f"fragments coalesce: {len(widget.got)} appends"
    assert stream.appends == len(widget.got)


async def test_each_append_is_followed_by_a_pause_in_proportion_to_its_cost() -> None:
    widget = SlowWidget(cost_s=0.1)
    stream = ThrottledMarkdownStream(widget)
    for i in range(30):
        stream.write(f"{i} ")
        await asyncio.sleep(0.02)
    while len(widget.spans) < 3:
        await asyncio.sleep(0.05)
    await stream.stop()
    for (start, end), (next_start, _) in zip(widget.spans, widget.spans[1:], strict=False):
        # a lower bound: a loaded machine only makes the pause longer
        assert next_start - end >= pause_after(end - start) * 0.95, widget.spans


async def test_stop_waits_for_the_append_under_way_then_takes_nothing_more() -> None:
    widget = SlowWidget(cost_s=0.2)
    stream = ThrottledMarkdownStream(widget)
    stream.write("first ")
    await asyncio.sleep(0.05)  # the first append is under way
    stream.write("held back ")
    await stream.stop()
    assert widget.got == ["first "] and widget.running == 0
    stream.write("after the end ")
    await asyncio.sleep(0.05)
    assert widget.got == ["first "]


class OneReply(App[None]):
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="messages")


async def test_a_long_code_fence_streams_into_the_real_widget_and_ends_whole() -> None:
    """Four-character fragments of a 200-line fence through a reply view: fewer re-renders than
    fragments while it streams, and the finished reply is the whole fence, highlighted once."""
    code = "```python\n" + "".join(f"    total = total + value_{i}\n" for i in range(200)) + "```\n"
    fragments = [code[i : i + 4] for i in range(0, len(code), 4)]
    app = OneReply()
    async with app.run_test(size=(100, 30)) as pilot:
        view = MessageView("assistant", path="optimized")
        await app.query_one("#messages").mount(view)
        for fragment in fragments:
            await view.append(fragment)
            await asyncio.sleep(0.001)
        stream = view._stream
        assert stream is not None and 0 < stream.appends < len(fragments)
        await view.finish(None)
        await pilot.pause()
        assert view.body.source == view.text == code
        (fence,) = view.body.query(MarkdownFence)
        assert fence.code.count("\n") >= 199 and "value_199" in fence.code
