"""The warm-up on the real engine: once per engine, before its first timed turn, neither timed nor
saved (the app's flow with a fake engine is in tests/app/tui/test_tui_compare.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from backend.engine.local.vllm import VllmEngine
from backend.engine.protocol import EngineRequest, TurnEvent
from backend.engine.session.warmup import WARM_UP_PREFIX, WARM_UP_TOKENS
from tests.support.tui_pilot import make_app, send

pytestmark = pytest.mark.engine


class Counted:
    """A session engine seen through the app: its requests counted, its shutdown left to the session."""

    def __init__(self, engine: VllmEngine) -> None:
        self.engine = engine
        self.warm_ups: list[str] = []
        self.turns: list[str] = []
        self.warm_up_events: list[TurnEvent] = []

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        warm = request.request_id.startswith(WARM_UP_PREFIX)
        (self.warm_ups if warm else self.turns).append(request.request_id)
        return self._events(request, warm)

    async def _events(self, request: EngineRequest, warm: bool) -> AsyncIterator[TurnEvent]:
        async for event in self.engine.stream(request):
            if warm:
                self.warm_up_events.append(event)
            yield event

    async def shutdown(self) -> None:
        return None  # the session fixture's engines outlive this app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


async def test_each_engine_is_warmed_up_once_and_the_warm_up_is_neither_timed_nor_saved(
    path_engines: tuple[VllmEngine, VllmEngine], tmp_path: Path
) -> None:
    counted = {"baseline": Counted(path_engines[0]), "optimized": Counted(path_engines[1])}
    app, _ = make_app(tmp_path, lambda path: counted[path], max_tokens=12)  # type: ignore[arg-type,return-value]
    async with app.run_test() as pilot:
        await send(app, pilot, "Say one thing.")
        for _ in range(2):
            await pilot.press("f3")
            await send(app, pilot, "Say one more thing.")
        shown = [view.text for view in app.query(MessageView)]
        verdict = str(list(app.query(CompareView))[-1].query_one(".verdict").render())
    for path, engine in counted.items():
        assert len(engine.warm_ups) == 1, f"{path}: one warm-up for the engine's whole life in the app"
        assert len(engine.turns) == (3 if path == "optimized" else 2)
        finished = engine.warm_up_events[-1]
        assert type(finished).__name__ == "Finished" and len(finished.token_ids) == WARM_UP_TOKENS  # type: ignore[attr-defined]
        assert finished.text not in shown, f"{path}: the warm-up's reply is not shown"  # type: ignore[attr-defined]
    turns = app.conversation.turns
    assert [t.role for t in turns] == ["user", "assistant"] * 3, "nothing of the warm-ups is saved"
    for turn in turns[1::2]:  # a turn's figures are its own request's (12 tokens at most), not the warm-up's
        assert turn.metrics is not None and 0 < turn.metrics.generated_tokens <= 12
    assert "of 2 compares" in verdict and "parity: identical (" in verdict
