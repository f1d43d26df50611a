"""The chat app built the way ``gemma-chat`` builds it: flags → settings → model source → engines.

No hand-made ``Settings`` here: each app comes from ``build_app`` with parsed command-line
arguments (and config files where the test writes one), and the engine tests run a real
vLLM engine through the app's own factory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import build_parser
from app.commands.chat import build_app
from app.tui.app import GemmaChatApp
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from backend.checkpoints import GeneratedCheckpoint
from backend.engine.protocol import EngineInfo
from backend.engine.session.factory import DeferredEngine
from tests.support.tui_pilot import wait_until

pytestmark = (
    pytest.mark.second_lane
)  # python3 -m tests: an engine test of the second lane (tests/__main__.py)


def _app(tmp_path: Path, *argv: str) -> GemmaChatApp:
    return build_app(build_parser().parse_args(list(argv)), tmp_path / "chat.log")


def _config(home: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(home))
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(text)


def test_demo_flags_keep_their_values_in_any_order(tmp_path: Path) -> None:
    for argv in (
        ["--demo", "--data-dir", str(tmp_path / "d"), "--max-model-len", "2048", "--dtype", "float32"],
        ["--data-dir", str(tmp_path / "d"), "--dtype", "float32", "--max-model-len", "2048", "--demo"],
    ):
        app = _app(tmp_path, *argv)
        assert app.settings.demo and app.settings.data_dir == tmp_path / "d"
        assert app.settings.engine.max_model_len == 2048 and app.settings.engine.dtype == "float32"
        assert app.tools is None, "the demo model was trained without tool calls"
        assert app.log_path == tmp_path / "chat.log"
        engine = app.pool.factory("optimized")
        assert isinstance(engine, DeferredEngine) and engine.settings == app.settings
        assert engine.log_path == app.log_path, "a failed start is diagnosed from the chat's log"


def test_config_file_switches_tools_off(
    tmp_path: Path, tiny: GeneratedCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _app(tmp_path, "--model", str(tiny.model)).tools is not None, "a generated checkpoint calls tools"
    _config(tmp_path / "home", "[tools]\nenabled = false\n", monkeypatch)
    app = _app(tmp_path, "--model", str(tiny.model))
    assert app.tools is None and not app.settings.tools.enabled


async def _one_turn(app: GemmaChatApp, text: str) -> tuple[MessageView, EngineInfo]:
    """Wait for the engine, send ``text``, return the reply and what the engine said it is."""
    async with app.run_test() as pilot:
        try:
            await wait_until(pilot, lambda: app.pool.state(app.path).stage in ("ready", "failed"), 300)
            assert app.pool.state(app.path).ready, app.pool.state(app.path).detail
            prompt = app.query_one(PromptInput)
            prompt.text = text
            prompt.focus()
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.turn is None and len(app.conversation.turns) == 2, 120)
            (reply,) = [v for v in app.query(MessageView) if v.role != "user"]
            assert not reply.query(".error"), reply.query_one(".error").render()
            info = app.pool.state(app.path).info
            assert info is not None and app.status.context_window == info.max_model_len
            return reply, info
        finally:
            await app.pool.shutdown()


@pytest.mark.engine
async def test_a_turn_on_the_real_engine_with_tools_off_from_the_config_file(
    tmp_path: Path, tiny: GeneratedCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first-run crash: tools off (as for the demo model) and a message sent."""
    _config(tmp_path / "home", "max_tokens = 16\n[tools]\nenabled = false\n", monkeypatch)
    app = _app(tmp_path, "--model", str(tiny.model), "--path", "eager", "--kv-cache-gib", "1")
    assert app.tools is None
    reply, _ = await _one_turn(app, "Hello from the first run")
    assert reply.metrics is not None and 0 < reply.metrics.generated_tokens <= 16
    assert app.conversation.turns[-1].text == reply.text
    assert app.conversation.turns[-1].extra["status"] == "done"


@pytest.mark.engine
async def test_a_turn_on_the_real_engine_with_tools_on(
    tmp_path: Path, tiny: GeneratedCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(tmp_path / "home", "max_tokens = 16\n", monkeypatch)
    app = _app(tmp_path, "--model", str(tiny.model), "--path", "eager", "--kv-cache-gib", "1")
    assert app.tools is not None
    reply, info = await _one_turn(app, "Hello with tools declared")
    assert reply.metrics is not None and reply.metrics.generated_tokens > 0
    assert reply.metrics.decode_tokens_per_s is not None
    assert info.engine_args["enforce_eager"] is True
