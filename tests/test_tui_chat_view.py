"""The chat view as a reader meets it: a reply's lines on screen, scrolling back while typing."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._markdown import MarkdownParagraph

from app.tui.widgets.prompt_input import PromptInput
from tests.fake_engine import FakeEngine
from tests.tui_pilot import make_app, replies, send, wait_until_streaming

UNFENCED_PYTHON = "def f(path):\n    if path:\n        return None\n    return path"


def lines(count: int) -> str:
    return "\n".join(f"line {i}" for i in range(count))


async def test_a_replys_line_breaks_stay_on_screen(tmp_path: Path) -> None:
    """Unfenced lines (the demo model's Python) are shown one per line, not joined into one."""
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=UNFENCED_PYTHON))
    async with app.run_test() as pilot:
        await send(app, pilot, "def f")
        (reply,) = replies(app)
        (paragraph,) = reply.body.query(MarkdownParagraph)
        shown = str(paragraph.render()).splitlines()
        assert [line.strip() for line in shown] == ["def f(path):", "if path:", "return None", "return path"]


async def test_page_keys_in_the_prompt_scroll_the_chat(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=lines(120)))
    async with app.run_test() as pilot:
        await send(app, pilot, "a long one")
        view = app.messages_view
        prompt = app.query_one(PromptInput)
        prompt.text = "a draft"
        assert view.max_scroll_y > 0 and view.scroll_y == view.max_scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert view.scroll_y < view.max_scroll_y
        assert prompt.text == "a draft" and prompt.has_focus
        while view.scroll_y < view.max_scroll_y:
            before = view.scroll_y
            await pilot.press("pagedown")
            await pilot.pause()
            assert view.scroll_y > before
        assert prompt.text == "a draft"


async def test_scrolled_up_chat_stays_put_while_a_reply_streams(tmp_path: Path) -> None:
    # long enough to be streaming still when the view has grown twice: the view grows in steps (the
    # reply's re-rendering pauses in proportion to its cost, more so on a loaded machine)
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, delay_s=0.01, reply=lines(1000)))
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "stream a long one"
        prompt.focus()
        await pilot.press("enter")
        view = app.messages_view
        await wait_until_streaming(pilot, lambda: view.max_scroll_y > 40)
        await pilot.press("pageup", "pageup")
        await pilot.pause(0.1)
        held, grown_from = view.scroll_y, view.max_scroll_y
        await wait_until_streaming(pilot, lambda: view.max_scroll_y > grown_from + 20)
        assert view.scroll_y == held, "the reply pulled a reader back down"
        assert app.turn is not None, "the reply had ended: nothing was checked while streaming"
