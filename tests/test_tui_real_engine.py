"""One full chat turn in the app against the real vLLM engine on the generated tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.tui.app import GemmaChatApp
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from backend.settings import Settings
from backend.vllm_engine import VllmEngine

pytestmark = pytest.mark.engine


async def test_full_turn_on_the_real_engine(eager_engine: VllmEngine, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, max_tokens=24, profile="optimized")
    app = GemmaChatApp(settings, lambda profile: eager_engine, "tiny (real vLLM, eager)")
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "Hello from the real engine"
        prompt.focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        replies = [v for v in app.query(MessageView) if v.role != "user"]
        assert len(replies) == 1
        reply = replies[0]
        assert reply.metrics is not None and reply.metrics.generated_tokens > 0
        assert reply.metrics.decode_tokens_per_s is not None
        assert app.status.context_window == eager_engine.info.max_model_len  # type: ignore[union-attr]
        assert app.conversation.turns[-1].role == "assistant"
        assert app.conversation.turns[-1].text == reply.text
