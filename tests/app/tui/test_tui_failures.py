"""No error ends the app silently: errors injected into a turn, an action, a screen callback, a
palette command, a worker and the history are shown (with the log's path), and the app goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from app.tui.app import GemmaChatApp
from app.tui.screens.text_prompt import TextPromptScreen
from app.tui.widgets.message_view import MessageView
from backend.config.settings import Settings
from backend.engine.protocol import EngineRequest, TurnEvent
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import replies, send, wait_until


class BuggyEngine(FakeEngine):
    """Raises in the middle of its first turn (a bug, not an engine failure it reports)."""

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        calls = len(self.requests)
        async for event in super().stream(request):
            yield event
            if calls == 0 and len(self.requests) == 1 and type(event).__name__ == "Delta":
                raise RuntimeError("boom in the engine adapter")


def _app(tmp_path: Path, **engine: Any) -> GemmaChatApp:
    settings = Settings(data_dir=tmp_path)
    return GemmaChatApp(settings, lambda p: BuggyEngine(p, **engine), "fake", tmp_path / "chat.log")


def _notes(app: GemmaChatApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _has_internal_error(app: GemmaChatApp, what: str) -> bool:
    return any(f"Internal error while {what}" in n and "chat.log" in n for n in _notes(app))


async def test_an_error_inside_a_turn_shows_an_error_block_and_keeps_the_prompt(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Break, please")
        (reply,) = replies(app)
        block = str(reply.query_one(".error", Static).render())
        assert "Internal error while running the turn: RuntimeError: boom in the engine adapter" in block
        assert "Ctrl+R" in block and str(tmp_path / "chat.log") in block
        assert [t.text for t in app.conversation.turns] == ["Break, please"], "the message is kept"
        assert app.is_running and app.turn is None
        await pilot.press("ctrl+r")  # the same message again: the engine answers this time
        await wait_until(pilot, lambda: app.turn is None and len(app.conversation.turns) == 2)
        assert app.conversation.turns[-1].text.startswith("Hello from the fake engine")
    log = (tmp_path / "chat.log").read_text()
    assert "Traceback" in log and "RuntimeError: boom in the engine adapter" in log


async def test_an_error_in_an_action_is_reported_and_the_app_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path)

    def broken() -> None:
        raise KeyError("clipboard")

    async with app.run_test() as pilot:
        monkeypatch.setattr(app, "action_copy_reply", broken)
        await pilot.press("f5")
        await wait_until(pilot, lambda: _has_internal_error(app, "running the copy reply action"))
        app.query_one("PromptInput").text = "still here"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.conversation.turns) >= 1)
        assert app.is_running


async def test_errors_in_screen_callbacks_palette_commands_and_workers_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(tmp_path)

    def bad_callback(result: str | None) -> None:
        raise ValueError(f"cannot use {result}")

    async with app.run_test() as pilot:
        app.push_screen(TextPromptScreen("Anything:"), bad_callback)
        await pilot.pause()
        app.screen.dismiss("this")
        await wait_until(pilot, lambda: _has_internal_error(app, "acting on the TextPromptScreen result"))

        def full_disk(kind: str) -> Path:
            raise OSError(28, "No space left on device")

        def broken(kind: str) -> Path:
            raise RuntimeError("a bug in the export")

        (command,) = [c for c in app.get_system_commands(app.screen) if c.title == "Export Markdown"]
        monkeypatch.setattr(app, "export", full_disk)  # a full disk is said, not a bug (round 4)
        await command.callback()
        await pilot.pause()
        assert "Not exported: the exports folder: No space left on device." in _notes(app)
        monkeypatch.setattr(app, "export", broken)
        await command.callback()
        await pilot.pause()
        assert _has_internal_error(app, "running 'Export Markdown'"), _notes(app)

        monkeypatch.setattr("app.tui.actions.attach.load_attachments", lambda *a: 1 / 0)
        app.attach(tmp_path / "x.png")
        await wait_until(pilot, lambda: _has_internal_error(app, "reading the attachment"))
        assert app.is_running


async def test_an_unreadable_history_does_not_keep_the_app_from_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.chat.store import ChatStore

    def locked(self: ChatStore) -> int | None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(ChatStore, "last_chat", locked)
    app = _app(tmp_path)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: _has_internal_error(app, "reopening your last chat"))
        await wait_until(pilot, lambda: app.pool.state("optimized").ready)
        await send(app, pilot, "A new chat then")
        assert len(replies(app)) == 1


async def test_an_error_that_must_end_the_app_leaves_one_line_with_the_log(tmp_path: Path) -> None:
    class Broken(MessageView):
        def compose(self) -> Any:
            raise RuntimeError("cannot draw")

    app = _app(tmp_path)
    with pytest.raises(RuntimeError, match="cannot draw"):
        async with app.run_test() as pilot:
            await app.messages_view.mount(Broken("user", "x"))
            await pilot.pause()
    assert app.fatal is not None and "Internal error while running the app" in app.fatal
    assert str(tmp_path / "chat.log") in app.fatal and app.return_code == 1
