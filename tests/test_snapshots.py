"""Screenshots of the app's screens (pytest-textual-snapshot), with the fake engine.

Update them after an intended change: ``python3 -m tests tests/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.tui.app import GemmaChatApp
from app.tui.widgets.prompt_input import PromptInput
from backend.settings import Settings
from tests.fake_engine import FakeEngine
from tests.test_tui import wait_until

SIZE = (110, 32)


def _app(tmp_path: Path) -> GemmaChatApp:
    settings = Settings(data_dir=tmp_path, theme="textual-dark")
    return GemmaChatApp(settings, lambda profile: FakeEngine(profile), "fake-model")


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
