"""Compare mode over several compares (fake engine): the first path alternates, each engine is warmed
up once before its first timed turn, and the verdict carries the chat's median and range.

The real-engine side (the warm-up request on vLLM, neither timed nor saved) is in
tests/app/tui/test_warm_up.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.tui.widgets.compare_view import CompareView
from backend.chat.verdict import FIRST_KEY, SPEEDUP_KEY
from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import EngineRequest
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, send

OPTIMIZED_TOK_S = [100.0, 35.0, 60.0]
"""The optimized path's decode speed in three compares (the baseline's is 40): 2.5x, 0.88x, 1.5x."""


class Timed(FakeEngine):
    """A fake engine that notes the order turns reach it; the optimized path's speed varies."""

    order: list[str]

    def _metrics(self, request: EngineRequest, generated: int) -> TurnMetrics:
        metrics = super()._metrics(request, generated)
        if self.path != "optimized":
            return metrics
        speed = OPTIMIZED_TOK_S[min(len(self.requests), len(OPTIMIZED_TOK_S)) - 1]
        return replace(metrics, decode_tokens_per_s=speed, e2e_s=0.05 + generated / speed)


async def test_three_compares_alternate_the_first_path_and_end_within_noise(tmp_path: Path) -> None:
    order: list[str] = []
    engines: dict[str, Timed] = {}

    def factory(path: str) -> Timed:
        engines[path] = Timed(path)
        original = engines[path].stream

        def stream(request: EngineRequest):  # type: ignore[no-untyped-def]
            if not request.request_id.startswith("warm-up-"):
                order.append(path)
            return original(request)

        engines[path].stream = stream  # type: ignore[method-assign]
        return engines[path]

    app, _ = make_app(tmp_path, factory)
    verdicts: list[str] = []
    async with app.run_test() as pilot:
        for question in ("one", "two", "three"):
            await pilot.press("f3")
            await send(app, pilot, f"Compare {question}")
            view = list(app.query(CompareView))[-1]
            verdicts.append(str(view.query_one(".verdict").render()))
    assert order == ["baseline", "optimized", "optimized", "baseline", "baseline", "optimized"]
    assert [len(e.warm_ups) for e in engines.values()] == [1, 1], (
        "one warm-up per engine, before its first turn"
    )
    assert (
        verdicts[0].startswith("speed-up: decode 2.50x, end-to-end ")
        and "(one run, baseline first" in verdicts[0]
    )
    assert verdicts[1].startswith(
        "speed-up: decode median 1.69x of 2 compares (range 0.88-2.50x): within noise"
    )
    assert "this run: decode 0.88x" in verdicts[1] and "optimized first" in verdicts[1]
    assert verdicts[2].startswith(
        "speed-up: decode median 1.50x of 3 compares (range 0.88-2.50x): within noise"
    )
    replies = [t for t in app.conversation.turns if t.role == "assistant"]
    assert [t.extra[FIRST_KEY] for t in replies] == ["baseline", "optimized", "baseline"]
    assert [round(float(t.extra[SPEEDUP_KEY]), 3) for t in replies] == [2.5, 0.875, 1.5]  # type: ignore[arg-type]
    assert all("warm-up" not in t.text and t.text != "hello" for t in app.conversation.turns), "not saved"
