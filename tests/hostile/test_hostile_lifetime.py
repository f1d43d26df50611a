"""Hardening round 2, the app's ways out (issue 37): Ctrl+Q, SIGTERM, SIGHUP and SIGINT each keep
the reply in progress (marked stopped), Ctrl+Q works over the tool-approval dialog, quitting during
a remote-style reply uses no closed client, and Enter while the app cannot take a message keeps it.
The real processes under those signals (engines, MCP servers and their children, the terminal)
are in tests/hostile/test_hostile_processes.py; the corpus cases in
tests/hostile/hostile_lifetime_cases.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.chat.store import ChatStore
from backend.engine.protocol import EngineRequest, TurnEvent
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, wait_until, wait_until_streaming

LONG = " ".join(f"word{i}" for i in range(400))


def _saved(tmp_path: Path) -> list[tuple[str, str, object]]:
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    rows = [(m.role, m.text, m.extra.get("status")) for m in store.branch(chat)]
    store.close()
    return rows


async def _quit_mid_reply(tmp_path: Path, how: str) -> None:
    from app.tui.widgets.prompt_input import PromptInput

    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=LONG, delay_s=0.02))
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "a long answer please"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: bool(replies(app)) and len(replies(app)[0].text) > 20)
        if how == "ctrl+q":
            await pilot.press("ctrl+q")
        else:
            app._on_signal(how)  # what the loop's signal handler calls
        deadline = time.monotonic() + 15
        while app.is_running and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert not app.is_running, f"{how} did not end the app"
    rows = _saved(tmp_path)
    assert rows[0][:2] == ("user", "a long answer please")
    assert len(rows) == 2, f"{how}: the partial reply was not saved: {rows}"
    role, text, status = rows[1]
    assert role == "assistant" and text.startswith("word0 word1") and status == "stopped", rows[1]
    assert len(text) < len(LONG), "a partial reply, not a finished one"


@pytest.mark.parametrize("how", ["ctrl+q", "SIGTERM", "SIGHUP", "SIGINT"])
async def test_quitting_mid_reply_saves_the_partial_reply(tmp_path: Path, how: str) -> None:
    await _quit_mid_reply(tmp_path, how)


async def test_ctrl_q_quits_over_the_tool_approval_dialog(tmp_path: Path) -> None:
    from app.tui.screens.approval import ApprovalScreen
    from app.tui.widgets.prompt_input import PromptInput
    from backend.config.settings import ToolSettings
    from backend.gemma4.call_format import format_call

    call = format_call("calculator", {"expression": "6 * 7"}) + "<|tool_response>"
    app, _ = make_app(
        tmp_path,
        lambda p: FakeEngine(p, script=["Computing. " + call, "42"]),
        tools=ToolSettings(approval="every-call"),
    )
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "6*7?"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        started = time.monotonic()
        await pilot.press("ctrl+q")
        while app.is_running and time.monotonic() - started < 10:
            await pilot.pause(0.05)
        assert not app.is_running, "Ctrl+Q was ignored while the approval dialog was open"
    rows = _saved(tmp_path)
    assert rows[-1][0] == "assistant" and rows[-1][1].startswith("Computing") and rows[-1][2] == "stopped"


class ClosingClient(FakeEngine):
    """Like the remote engine: a stream that outlives ``shutdown`` meets a closed client."""

    closed: bool = False

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        async for event in super().stream(request):
            if self.closed:
                raise RuntimeError("Cannot send a request, as the client has been closed.")
            yield event

    async def shutdown(self) -> None:
        self.closed = True
        await super().shutdown()


async def test_ctrl_q_during_a_remote_reply_stops_the_turn_before_closing_the_client(tmp_path: Path) -> None:
    from app.tui.widgets.prompt_input import PromptInput

    app, _ = make_app(tmp_path, lambda p: ClosingClient(p, reply=LONG, delay_s=0.02))
    failures: list[str] = []
    app.report_failure = lambda what, error: failures.append(f"{what}: {error}") or ""  # type: ignore[method-assign]
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "go"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: bool(replies(app)) and len(replies(app)[0].text) > 20)
        await pilot.press("ctrl+q")
        while app.is_running:
            await pilot.pause(0.05)
    assert not failures, failures
    assert _saved(tmp_path)[-1][2] == "stopped"


class SlowShutdown(FakeEngine):
    async def shutdown(self) -> None:
        await asyncio.sleep(1.0)  # a vLLM engine takes seconds
        await super().shutdown()


async def test_enter_while_the_app_quits_keeps_the_message(tmp_path: Path) -> None:
    """Enter pressed while the app quits (the engines shutting down) was taken after ``exit``:
    ``MountError: Can't mount widget(s) before VerticalScroll(id='messages') is mounted`` — a
    widget is not "attached" once the app is exiting — and the message left the input. Now it is
    refused with a notice and stays in the input."""
    from app.tui.widgets.prompt_input import PromptInput

    app, _ = make_app(tmp_path, lambda p: SlowShutdown(p))
    failures: list[str] = []
    app.report_failure = lambda what, error: failures.append(f"{what}: {error}") or ""  # type: ignore[method-assign]
    async with app.run_test() as pilot:
        await wait_until_streaming(pilot, lambda: app.pool.state("optimized").ready)
        prompt = app.query_one(PromptInput)
        prompt.text = "typed while quitting"
        quitting = asyncio.ensure_future(app.run_action("quit"))  # as a signal's handler runs it
        await pilot.pause(0.1)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert prompt.text == "typed while quitting", "the message was taken out of the input"
        await quitting
        while app.is_running:
            await pilot.pause(0.05)
        assert prompt.text == "typed while quitting", "the message was taken out of the input"
    assert not failures, failures


async def test_a_chat_two_windows_wrote_reopens_with_both_branches_reachable(tmp_path: Path) -> None:
    from backend.chat.conversation import Conversation

    one = Conversation(ChatStore(tmp_path / "history.db"))
    one.add_user("hello")
    one.add_reply("hi", "optimized", None)
    two = Conversation(ChatStore(tmp_path / "history.db"), one.chat_id)
    one.add_user("from window one")
    one.add_reply("answer one", "optimized", None)
    two.add_user("from window two")
    two.add_reply("answer two", "optimized", None)
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.pause(0.3)
        assert any("2 branches" in str(n.message) for n in app._notifications)
        assert app.conversation.turns[-1].text == "answer two", "the last writer's branch opens"
        commands = list(app.branch_commands())
        assert [c.title.split(":")[0] for c in commands] == ["Branch 1 of 2", "Branch 2 of 2 (shown)"]
        assert "from window one" in commands[0].title
        commands[0].callback()
        await pilot.pause(0.3)
        assert [t.text for t in app.conversation.turns][-2:] == ["from window one", "answer one"]
        assert len(app.query("MessageView")) == 4


async def test_f6_during_a_plain_reply_does_not_mark_that_reply_as_thinking(tmp_path: Path) -> None:
    """Hardening round 3: F6 pressed while a reply without thinking streamed stored it with
    ``"think": true``; the reply keeps what its turn asked for, the next turn gets the new choice."""
    from app.tui.widgets.prompt_input import PromptInput

    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=" ".join(LONG.split()[:60]), delay_s=0.01))
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "plain please"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: bool(replies(app)) and len(replies(app)[0].text) > 20)
        await pilot.press("f6")
        await wait_until(pilot, lambda: app.turn is None)
        assert app.thinking, "F6 turned thinking on for the next turn"
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    reply = next(m for m in store.branch(chat) if m.role == "assistant")
    store.close()
    assert reply.extra.get("think") is False, reply.extra


async def test_ctrl_q_during_a_tool_step_of_a_reply_without_text_keeps_its_calls(tmp_path: Path) -> None:
    """Hardening round 3: Ctrl+Q during a long tool step saved nothing of a reply made only of calls."""
    from app.tui.screens.approval import ApprovalScreen
    from app.tui.widgets.prompt_input import PromptInput
    from backend.chat.store import ChatStore
    from backend.config.settings import ToolSettings
    from backend.gemma4.call_format import format_call

    calls = format_call("current_time", {}) + format_call("calculator", {"expression": "6 * 7"})
    app, _ = make_app(
        tmp_path,
        lambda p: FakeEngine(p, script=[calls + "<|tool_response>", "42"]),
        tools=ToolSettings(approval="every-call"),
    )
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "time and 6*7?"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("ctrl+q")
        started = time.monotonic()
        while app.is_running and time.monotonic() - started < 10:
            await pilot.pause(0.05)
        assert not app.is_running
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    saved = store.branch(chat)
    store.close()
    assert saved[-1].role == "assistant" and saved[-1].extra.get("status") == "stopped", saved[-1]
    assert saved[-1].extra.get("tools"), "the calls made so far are kept"
