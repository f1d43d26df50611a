"""Tool calls in the app (fake engine scripted to call tools; the loop itself runs on vLLM in
tests/tools/test_tools_engine.py): the timeline, approval, stop, compare parity and the history."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.tui.screens.approval import ApprovalScreen
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.tool_block import ToolBlock
from backend.chat.store import ChatStore
from backend.config.settings import ToolSettings
from backend.gemma4.call_format import format_call
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, send, wait_until


async def wait_for_dialog(pilot: Any) -> None:
    """Until the approval dialog shows (the turn's worker waits on it, so no waiting for workers)."""
    deadline = time.monotonic() + 30
    while not isinstance(pilot.app.screen, ApprovalScreen):
        assert time.monotonic() < deadline, "no approval dialog"
        await pilot.pause(0.05)


CALC = format_call("calculator", {"expression": "6 * 7"}) + "<|tool_response>"


def _scripted(*scripts: list[str], **kwargs: object):  # type: ignore[no-untyped-def]
    engines: dict[str, FakeEngine] = {}
    queue = list(scripts)

    def factory(path: str) -> FakeEngine:
        engines[path] = FakeEngine(path, script=list(queue.pop(0)) if queue else [], **kwargs)  # type: ignore[arg-type]
        return engines[path]

    return factory, engines


async def test_a_tool_call_shows_a_timeline_block_and_tool_time(tmp_path: Path) -> None:
    factory, engines = _scripted(["Let me compute. " + CALC, "It is 42."])
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await send(app, pilot, "What is 6 * 7?")
        (reply,) = replies(app)
        assert reply.text == "Let me compute.\n\nIt is 42."
        (block,) = reply.query(ToolBlock)
        assert block.record is not None and block.record.result == 42
        assert str(block.title).startswith('✓ calculator(expression="6 * 7")') and str(block.title).endswith(
            "ok"
        )
        figures = str(reply.query_one(".figures").render())
        assert "model " in figures and "tools " in figures
        assert "<tool:calculator>" in engines["optimized"].requests[0].prompt
        assert "{'result': 42}" in engines["optimized"].requests[1].prompt
        assert '✓ calculator(expression="6 * 7") → 42' in app.export("markdown").read_text()
        # the next turn's prompt still holds the call and its result (kept in the history)
        await send(app, pilot, "And doubled?")
        assert "{'result': 42}" in engines["optimized"].requests[-1].prompt
        assert engines["optimized"].requests[-1].prompt.count("Let me compute.") == 1, "no text twice"
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    stored = store.branch(chat)[1]
    assert stored.extra["tools"][0]["result"] == 42  # type: ignore[index]
    app2, _ = make_app(tmp_path, _scripted()[0])
    async with app2.run_test() as pilot:
        await wait_until(pilot, lambda: len(app2.query(ToolBlock)) == 1)
        assert app2.query_one(ToolBlock).record.result == 42  # type: ignore[union-attr]


async def test_bad_calls_are_visible_and_the_app_carries_on(tmp_path: Path) -> None:
    bad = '<|tool_call>call:calculator{expression:<|"|>1+}<tool_call|>' + format_call("nope", {"x": 1})
    factory, _ = _scripted([bad, format_call("calculator", {"expression": "1/0"}), "Sorry."])
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await send(app, pilot, "Break things")
        statuses = [b.record.status for b in app.query(ToolBlock) if b.record is not None]
        assert statuses == ["malformed", "unknown_tool", "error"]
        assert replies(app)[0].text == "Sorry."


async def test_approval_deny_then_always(tmp_path: Path) -> None:
    factory, engines = _scripted([CALC, "Denied.", CALC, "Ran.", CALC, "Again."])
    app, _ = make_app(tmp_path, factory, tools=ToolSettings(approval="every-call"))
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "first"
        await pilot.press("enter")
        await wait_for_dialog(pilot)
        await pilot.press("d")
        await wait_until(pilot, lambda: app.turn is None)
        assert app.query(ToolBlock)[-1].record.status == "denied"  # type: ignore[union-attr]
        assert "did not allow calculator" in engines["optimized"].requests[1].prompt
        prompt.text = "second"
        await pilot.press("enter")
        await wait_for_dialog(pilot)
        await pilot.press("a")
        await wait_until(pilot, lambda: app.turn is None)
        assert app.query(ToolBlock)[-1].record.status == "ok"  # type: ignore[union-attr]
        await send(app, pilot, "third")  # "always for this chat": no dialog this time
        assert app.query(ToolBlock)[-1].record.status == "ok"  # type: ignore[union-attr]


async def test_esc_during_approval_stops_the_turn_and_keeps_the_chat(tmp_path: Path) -> None:
    factory, _ = _scripted([CALC, "never"])
    app, _ = make_app(tmp_path, factory, tools=ToolSettings(approval="every-call"))
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "please"
        await pilot.press("enter")
        await wait_for_dialog(pilot)
        await app.action_stop()
        await wait_until(pilot, lambda: app.turn is None)
        assert replies(app)[0].status == "stopped"
        assert [t.role for t in app.conversation.turns] == ["user", "assistant"]
        assert app.conversation.turns[0].text == "please"


async def test_compare_runs_each_tool_once_and_both_paths_read_the_same_result(tmp_path: Path) -> None:
    factory, engines = _scripted([CALC, "It is 42."], [CALC, "It is 42."])
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await send(app, pilot, "6*7?")
        await wait_until(pilot, lambda: len(app.query(ToolBlock)) == 2)
        view = app.query_one(CompareView)
        base, opt = (view.panes[p].query_one(ToolBlock).record for p in ("baseline", "optimized"))
        assert base is not None and opt is not None
        assert (base.result, base.reused, opt.result, opt.reused) == (42, False, 42, True)
        assert engines["baseline"].requests[1].prompt == engines["optimized"].requests[1].prompt
