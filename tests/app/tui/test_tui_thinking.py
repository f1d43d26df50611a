"""Thinking mode in the chat app (fake engine): F6 and the palette toggle it per chat, the status bar
says so, the prompt asks for it, and a thinking reply shows its thought collapsed and dimmed above
the answer (never as answer text), is stored as the thought, and comes back with the chat.
The same reading of a real engine's output: tests/tools/test_tools_engine.py,
tests/gemma4/test_published_template_ask.py."""

from __future__ import annotations

from pathlib import Path

from app.tui.widgets.thought_block import ThoughtBlock
from backend.chat.store import ChatStore
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, send

THINKING = "<|channel>thought\nThe user greets me. I should greet back.<channel|>Hello to you too!"


def _scripted(*replies_: str):  # type: ignore[no-untyped-def]
    engines: dict[str, FakeEngine] = {}

    def factory(path: str) -> FakeEngine:
        engines[path] = FakeEngine(path, script=list(replies_))
        return engines[path]

    return factory, engines


async def test_f6_turns_thinking_on_for_this_chat_and_the_prompt_asks_for_it(tmp_path: Path) -> None:
    factory, engines = _scripted("Plain.", THINKING)
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        assert not app.status.think and "thinking" not in app.status.figures().line(200)
        await send(app, pilot, "Hi")
        assert "<|think|>" not in engines["optimized"].requests[0].prompt
        await pilot.press("f6")
        assert app.status.think and "thinking" in app.status.figures().line(200)
        await send(app, pilot, "Hello")
        assert engines["optimized"].requests[1].prompt.startswith("<|think|>")
        reply = replies(app)[-1]
        assert reply.text == "Hello to you too!"
        block = reply.query_one(ThoughtBlock)
        assert block.display and block.collapsed, "shown, collapsed"
        assert block.text == "The user greets me. I should greet back."
        assert "thought" in str(block.title) and "<|channel>" not in reply.text
        thought_tokens = reply.metrics.thought_tokens if reply.metrics else 0
        assert thought_tokens > 0 and f"tokens ({thought_tokens} thought)" in str(
            reply.query_one(".figures").render()
        )
        block.collapsed = False  # Enter or a click on its title opens it
        await pilot.pause()
        assert block.view.visible
        markdown = app.export("markdown").read_text()
        assert "<summary>thought</summary>" in markdown and "> The user greets me." in markdown
        assert "<|channel>" not in markdown
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    last = store.branch(chat)[-1]
    assert last.text == "Hello to you too!" and last.extra["thought"] == block.text and last.extra["think"]


async def test_a_chat_reopens_with_its_thinking_mode_and_its_thoughts(tmp_path: Path) -> None:
    factory, _ = _scripted(THINKING)
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        app.action_toggle_think()
        await send(app, pilot, "Hello")
    factory, engines = _scripted("Again.")
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.status.think, "the chat kept its mode"
        (old,) = replies(app)
        assert old.query_one(ThoughtBlock).text.startswith("The user greets me")
        await send(app, pilot, "Again?")
        assert engines["optimized"].requests[0].prompt.startswith("<|think|>")


async def test_thinking_is_off_by_default_and_the_setting_turns_it_on(tmp_path: Path) -> None:
    factory, engines = _scripted("Fine.")
    app, _ = make_app(tmp_path, factory, think=True)
    async with app.run_test() as pilot:
        assert app.status.think
        await send(app, pilot, "Hi")
        assert engines["optimized"].requests[0].prompt.startswith("<|think|>")
        commands = [c.title for c in app.palette_commands(app.screen)]
        assert "Toggle thinking" in commands
