"""F7: the last reply with the tokens that came from accepted drafts shaded (fake engine)."""

from __future__ import annotations

from pathlib import Path

from app.tui.screens.drafts import DRAFTED_STYLE, DraftsScreen
from tests.tui_pilot import make_app, replies, send, wait_until


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
