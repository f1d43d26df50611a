"""The chat view as a reader meets it: a reply's lines on screen, scrolling back while typing."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._markdown import MarkdownFence, MarkdownParagraph

from app.tui.widgets.prompt_input import PromptInput
from tests.support.fake_engine import FakeEngine
from tests.support.terminal import APP, Terminal, reopened_chat
from tests.support.tui_pilot import make_app, replies, send, wait_until_streaming

ROOT = Path(__file__).resolve().parents[3]
DEMO_BODY = "if path:\n        return None\n    return path"
"""The demo model's reply to ``def f(path):`` as stored: a method body, its first line stripped."""


def lines(count: int) -> str:
    return "\n".join(f"line {i}" for i in range(count))


async def test_a_replys_line_breaks_stay_on_screen(tmp_path: Path) -> None:
    """Unfenced lines are shown one per line, not joined into one."""
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply="first line\nsecond line\nthird"))
    async with app.run_test() as pilot:
        await send(app, pilot, "lines")
        (reply,) = replies(app)
        (paragraph,) = reply.body.query(MarkdownParagraph)
        shown = str(paragraph.render()).splitlines()
        assert [line.strip() for line in shown] == ["first line", "second line", "third"]


async def test_unfenced_code_keeps_its_indentation_on_screen_and_f8_copies_it(tmp_path: Path) -> None:
    """Issue 65, item 7: the demo model's Python, stored with its first line stripped, showed
    flush left (Markdown drops a paragraph's indentation); it shows as a code block, indented."""
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=DEMO_BODY))
    async with app.run_test(size=(80, 30)) as pilot:
        await send(app, pilot, "def f(path):")
        (reply,) = replies(app)
        (fence,) = reply.body.query(MarkdownFence)
        assert fence.code.splitlines() == ["if path:", "    return None", "return path"]
        assert reply.text == DEMO_BODY, "what is stored stays what the model said"
        await pilot.press("f8")
        await pilot.pause()
        assert app.clipboard == "if path:\n    return None\nreturn path\n"


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


def test_unfenced_code_is_drawn_indented_in_a_terminal(tmp_path: Path) -> None:
    """The same reply drawn on a pty (a reopened chat), read back as a person sees it."""
    term = Terminal(APP, reopened_chat(tmp_path, DEMO_BODY), cwd=str(ROOT))
    try:
        screen = term.wait_for("return path", 60, "the reopened chat")
        x, y = term.find("if path:")
        drawn = [line[x:].rstrip() for line in screen.splitlines()[y : y + 3]]
        assert drawn == ["if path:", "    return None", "return path"], screen
        term.press("ctrl+q")
        assert term.wait_exit(30) == 0
    finally:
        term.close()
