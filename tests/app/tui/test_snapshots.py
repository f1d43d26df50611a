"""Screenshots of the app's screens (pytest-textual-snapshot), with the fake engine.

Update them after an intended change: ``python3 -m tests tests/app/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.tui.app import GemmaChatApp
from app.tui.widgets.prompt_input import PromptInput
from backend.config.settings import Settings
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import wait_until

SIZE = (110, 32)


class _SteadyApp(GemmaChatApp):
    """The app with the input's cursor not blinking, so screenshots do not depend on timing."""

    async def on_mount(self) -> None:
        await super().on_mount()
        self.query_one(PromptInput).cursor_blink = False


def _app(tmp_path: Path) -> GemmaChatApp:
    settings = Settings(data_dir=tmp_path, theme="textual-dark")
    app = _SteadyApp(settings, lambda path: FakeEngine(path), "fake-model")
    app.graphics = "halfblocks"  # whatever terminal runs the tests: pictures drawn the same way
    return app


async def _send(pilot: Any, text: str) -> None:
    turns_before = len(pilot.app.conversation.turns)
    pilot.app.query_one(PromptInput).text = text
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(pilot.app.conversation.turns) >= turns_before + 2)
    pilot.app.clear_notifications()
    await pilot.pause()


def test_chat_screen(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    async def ready(pilot: Any) -> None:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(tmp_path), run_before=ready, terminal_size=SIZE)


def test_reply_with_footer(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    async def reply(pilot: Any) -> None:
        await _send(pilot, "Show me some code")

    assert snap_compare(_app(tmp_path), run_before=reply, terminal_size=SIZE)


def test_compare_view(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    async def compare(pilot: Any) -> None:
        await pilot.press("f3")
        await _send(pilot, "Compare both paths")

    assert snap_compare(_app(tmp_path), run_before=compare, terminal_size=SIZE)


def test_help_screen(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    async def open_help(pilot: Any) -> None:
        await pilot.app.workers.wait_for_complete()
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(_app(tmp_path), run_before=open_help, terminal_size=SIZE)


def test_attachment_chips(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    from tests.support.media_files import audio_file, image_file
    from tests.support.tui_pilot import wait_until

    image, audio = image_file(tmp_path / "cat.png"), audio_file(tmp_path / "voice.wav", seconds=2.0)

    async def attach(pilot: Any) -> None:
        await pilot.app.workers.wait_for_complete()
        for count, path in enumerate((image, audio), start=1):
            pilot.app.query_one(PromptInput).post_message(PromptInput.PathPasted(path))
            await wait_until(pilot, lambda count=count: len(pilot.app.pending) == count)
        pilot.app.query_one(PromptInput).text = "What do you see and hear?"
        await pilot.pause()

    assert snap_compare(_app(tmp_path), run_before=attach, terminal_size=SIZE)
