"""The app under the same faults as the hostile-input corpus (tests/hostile/test_hostile_inputs.py): a
prompt over the window, an engine dying mid-stream, a locked or corrupt history and a bad config
file each give a message, and the app (or command) goes on with nothing the user gave lost."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest


async def test_app_prompt_over_the_window_is_refused_and_the_app_goes_on(tmp_path: Path) -> None:
    from app.tui.widgets.prompt_input import PromptInput
    from tests.support.fake_engine import FakeEngine
    from tests.support.tui_pilot import make_app, replies, send, wait_until

    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, max_model_len=300), max_tokens=64)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        for _ in range(2):  # refused twice: neither time does it join the history
            prompt.text = "word " * 400
            prompt.focus()
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.turn is None and bool(prompt.text))
        block = str(replies(app)[0].query_one(".error").render())
        assert "not sent" in block and "exceeds the optimized path's context window (300 tokens)" in block
        # round 4 (issue 55, item 8): kept in the input, not in the history it would be sent with
        assert not app.conversation.turns
        assert prompt.text.startswith("word word"), "the message is kept"
        prompt.text = ""
        await pilot.press("ctrl+n")
        await send(app, pilot, "short")
        assert replies(app)[-1].text.startswith("Hello"), "the app still answers"


async def test_app_engine_dying_mid_stream_keeps_the_partial_reply(tmp_path: Path) -> None:
    from collections.abc import AsyncIterator

    from backend.engine.protocol import Delta, EngineRequest, Failed, Started, TurnEvent
    from backend.engine.session.warmup import WARM_UP_PREFIX
    from tests.support.fake_engine import FakeEngine
    from tests.support.tui_pilot import make_app, replies, send

    class Dying(FakeEngine):
        async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
            if request.request_id.startswith(WARM_UP_PREFIX):  # it dies on the turn, not the warm-up
                async for event in super().stream(request):
                    yield event
                return
            self.requests.append(request)
            yield Started(request.request_id)
            yield Delta(request.request_id, "half an ans", (1,))
            yield Failed(request.request_id, "The engine process stopped unexpectedly.", "engine_died")

    created: list[FakeEngine] = []

    def factory(path: str) -> FakeEngine:
        created.append(Dying(path) if not created else FakeEngine(path))
        return created[-1]

    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await send(app, pilot, "first")
        reply = replies(app)[0]
        assert reply.text == "half an ans" and "stopped unexpectedly" in str(
            reply.query_one(".error").render()
        )
        assert app.conversation.turns[-1].text == "half an ans", "the partial reply is kept"
        await send(app, pilot, "again")
        assert len(created) == 2 and replies(app)[-1].text.startswith("Hello"), "a new engine answers"


async def test_app_with_a_locked_history_keeps_the_chat_and_saves_it_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program holds the history locked: the app opens it (WAL lets it read), says each
    save failed, keeps the chat, and saves all of it in order once the lock is gone."""
    from backend.chat import store as store_module
    from backend.chat.store import ChatStore
    from tests.support.tui_pilot import make_app, send

    ChatStore(tmp_path / "history.db").close()
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.3)
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        assert app.store is not None
        app.store._db.execute("PRAGMA busy_timeout = 300")
        blocker = sqlite3.connect(tmp_path / "history.db", timeout=0)
        blocker.execute("BEGIN EXCLUSIVE")
        await send(app, pilot, "while locked")
        assert any("database is locked" in str(n.message) for n in app._notifications)
        assert app.conversation.turns[0].text == "while locked", "kept in memory"
        blocker.rollback()
        blocker.close()
        await send(app, pilot, "after the lock")
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    texts = [m.text for m in store.branch(chat)]
    assert texts[0] == "while locked" and texts[2] == "after the lock" and len(texts) == 4, texts
    assert not list(tmp_path.glob("history.db.corrupt-*")), "a locked database is never moved aside"


async def test_app_with_a_corrupt_history_moves_it_aside_and_starts_clean(tmp_path: Path) -> None:
    from tests.support.tui_pilot import make_app, replies, send, wait_until

    (tmp_path / "history.db").write_bytes(os.urandom(8192))
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: any("moved aside" in str(n.message) for n in app._notifications))
        await send(app, pilot, "a fresh start")
        assert replies(app)[0].text.startswith("Hello")
    assert len(list(tmp_path.glob("history.db.corrupt-*"))) == 1, "kept, never deleted"


def test_a_bad_config_file_stops_a_command_with_its_name(tmp_path: Path) -> None:
    from tests.app.test_cli import _gemma_chat

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text('[tools]\nallowed_dir = ["/srv/safe"]\n')
    result = _gemma_chat("paths", "--demo", env={"GEMMA_CHAT_HOME": str(tmp_path)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "config.toml: [tools] allowed_dir is not a setting" in result.stderr
    assert "Did you mean allowed_dirs?" in result.stderr


async def test_a_pasted_megabyte_is_refused_at_once_and_kept(tmp_path: Path) -> None:
    """Hardening round 4 (issue 55, item 1): a pasted 1 MB line, sent, held the app for 90 s+ at
    100% CPU, growing to 3.9 GB, and it could not be quit. Refused now by size within the second,
    the text kept in the input; a long message that fits shows its first 20,000 characters."""
    import time

    from app.tui.widgets.message_view import SHOWN_CHARS, MessageView
    from app.tui.widgets.prompt_input import PromptInput
    from tests.support.tui_pilot import make_app, send

    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        notices: list[str] = []
        app.notify = lambda message, **_: notices.append(str(message))  # type: ignore[method-assign]
        prompt = app.query_one(PromptInput)
        prompt.text = "x" * (1 << 20)
        prompt.focus()
        began = time.monotonic()
        await pilot.press("enter")
        await pilot.pause()
        assert time.monotonic() - began < 5.0, "refused by size, not after minutes (a shared 2-core machine)"
        assert notices and notices[-1].startswith("Not sent: the message is 1,048,576 characters")
        assert len(prompt.text) == 1 << 20 and not app.conversation.turns and app.turn is None
        await send(app, pilot, "y" * 30_000)
        user_view = next(v for v in app.query(MessageView) if v.role == "user")
        assert len(user_view.text) == 30_000, "all of it is sent and stored"
        shown = user_view.body._markdown or ""
        assert len(shown) < SHOWN_CHARS + 100 and "10,000 more characters, sent in full" in shown


async def test_a_paste_is_inserted_once(tmp_path: Path) -> None:
    """Found while pasting the megabyte (round 4): the prompt called TextArea's paste handler, and
    Textual called it again after, so every paste went in twice (a 1 MB paste became 2 MB)."""
    from textual import events

    from app.tui.widgets.prompt_input import PromptInput
    from tests.support.tui_pilot import make_app

    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.focus()
        app.post_message(events.Paste("def pasted_once(x):"))  # as the terminal's driver does
        await pilot.pause()
        await pilot.pause()
        assert prompt.text == "def pasted_once(x):"
