"""Driving the chat app with Textual's Pilot against the fake engine: the app, sending, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.tui.app import GemmaChatApp
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from backend.config.settings import Settings
from tests.support.fake_engine import FakeEngine

Factory = Callable[[str], FakeEngine]


def make_app(
    tmp_path: Path, factory: Factory | None = None, **settings: object
) -> tuple[GemmaChatApp, dict[str, FakeEngine]]:
    engines: dict[str, FakeEngine] = {}

    def default(path: str) -> FakeEngine:
        engines[path] = FakeEngine(path)
        return engines[path]

    config = Settings(data_dir=tmp_path, **settings)  # type: ignore[arg-type]
    return GemmaChatApp(config, factory or default, "fake-model"), engines


async def wait_until_streaming(pilot: Any, condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Let the app run until ``condition`` holds, without waiting for its workers to end."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)


async def wait_until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Let the app run until ``condition`` holds and its workers have ended."""
    await wait_until_streaming(pilot, condition, timeout_s)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def send(app: GemmaChatApp, pilot: Any, text: str) -> None:
    """Send ``text`` and wait until the turn has ended (a reply, or a refusal) in the app."""
    prompt = app.query_one(PromptInput)
    prompt.text = text
    prompt.focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: prompt.text == "" and app.turn is None)


async def send_refused(app: GemmaChatApp, pilot: Any, text: str) -> None:
    """Send ``text`` where it will be refused before sending: wait until it is back in the input."""
    prompt = app.query_one(PromptInput)
    prompt.text = text
    prompt.focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: prompt.text == text and app.turn is None and bool(app._notifications))


def replies(app: GemmaChatApp) -> list[MessageView]:
    return [v for v in app.query(MessageView) if v.role != "user"]
