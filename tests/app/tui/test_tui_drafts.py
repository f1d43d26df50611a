"""F7: the last reply with the tokens that came from accepted drafts shaded (fake engine)."""

from __future__ import annotations

from pathlib import Path

from textual.containers import VerticalScroll
from textual.widgets import Static

from app.tui.screens.drafts import DRAFTED_STYLE, DraftsScreen, drafts_summary, shaded, without_markers
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, send, wait_until


async def test_f7_shades_the_tokens_that_came_from_accepted_drafts(tmp_path: Path) -> None:
    """The fake engine's steps: its first token alone, then an accepted draft and the target's
    token a step. The real engine's steps are tested in test_speculation.py."""
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("f7")
        await pilot.pause()
        assert not isinstance(app.screen, DraftsScreen), "no reply yet: a notice, no screen"
        await send(app, pilot, "Hello there")
        (reply,) = replies(app)
        assert "tokens/step (F7)" in str(reply.query_one(".figures").render())
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, DraftsScreen))
        screen = app.screen
        summary = str(screen.query_one("#drafts-summary").render())
        generated = len(reply.token_ids)
        accepted = (generated - 1) // 2
        assert f"{accepted} of {generated} tokens were accepted drafts" in summary
        text = screen.shaded_text
        shaded = [span for span in text.spans if span.style == DRAFTED_STYLE]
        assert len(shaded) == accepted, "one shaded run per accepted draft token"
        assert text.plain.startswith(engines["optimized"].decode([0])), "the reply's own token texts"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, DraftsScreen))


async def test_f7_reads_whole_a_long_reply_without_its_markers(tmp_path: Path) -> None:
    """Issue 65, item 6: the summary wraps at the dialog's width (it was cut at ``… 17 accept``),
    the end-of-turn token is not shown as ``<turn|>``, and a reply longer than the dialog scrolls."""
    reply = " ".join(f"word{i}" for i in range(400)) + " <turn|>"
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=reply, delay_s=0))
    async with app.run_test(size=(60, 30)) as pilot:
        await send(app, pilot, "a long one")
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, DraftsScreen))
        screen = app.screen
        summary = screen.query_one("#drafts-summary", Static)
        whole = drafts_summary(screen.metrics)
        assert len(whole) > summary.size.width, "the summary is wider than the dialog: it must wrap"
        assert summary.size.height > 1
        shown = " ".join(line.strip() for line in str(summary.render()).splitlines())
        assert shown == whole, "every word of the summary is on screen"
        assert "word399" in screen.shaded_text.plain
        assert "<turn|>" not in screen.shaded_text.plain
        assert "<turn|>" not in app.export_screenshot()
        scroll = screen.query_one("#drafts-scroll", VerticalScroll)
        assert scroll.max_scroll_y > 0 and scroll.scroll_y == 0
        await pilot.press("end")
        await wait_until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)


def test_markers_are_taken_out_of_token_texts() -> None:
    assert without_markers("<turn|>") == "" and without_markers("<eos>") == ""
    assert without_markers("  return x") == "  return x"
    assert shaded(["a", " b", "<turn|>"], [1]).plain == "a b"
