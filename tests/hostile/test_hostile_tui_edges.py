"""Smaller chat-app cases of issue 37: a repeated call in one path is never "reused from the other
path" (item 19), and at 20 columns the context gauge still shows ``used/window`` (item 21). The
keymap (item 18) is in the hostile corpus (``tests/hostile/hostile_config_cases.py``).

Hardening round 3 (issue 46): a reply without an answer says so, and a thought's ``</details>``
stays in its collapsed block (item 16); F3 with a path that cannot start answers with the other
(item 15); a file replaced between ``/attach`` and send is sent and kept as it is now (item 6)."""

from __future__ import annotations

from pathlib import Path

from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.status_bar import StatusBar, StatusFigures
from app.tui.widgets.tool_block import ToolBlock
from backend.gemma4.call_format import format_call
from tests.app.tui.test_tui import _attach_by_command
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, send, wait_until

CALC = format_call("calculator", {"expression": "6*7"}) + "<|tool_response>"


def _scripted(**scripts: list[str]):  # type: ignore[no-untyped-def]
    def factory(path: str) -> FakeEngine:
        return FakeEngine(path, script=list(scripts.get(path, [])))

    return factory


async def test_a_repeated_call_in_one_path_is_not_reused_from_the_other_path(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, _scripted(optimized=[CALC, CALC, "It is 42."]))
    async with app.run_test() as pilot:
        await send(app, pilot, "6*7, twice?")
        blocks = list(app.query(ToolBlock))
        assert len(blocks) == 2
        assert all(b.record is not None and not b.record.reused for b in blocks)
        assert not any("reused" in str(b.title) for b in blocks), [str(b.title) for b in blocks]


async def test_in_a_comparison_only_the_other_paths_call_is_reused(tmp_path: Path) -> None:
    factory = _scripted(baseline=[CALC, CALC, "It is 42."], optimized=[CALC, "It is 42."])
    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await send(app, pilot, "6*7?")
        await wait_until(pilot, lambda: len(app.query(ToolBlock)) == 3)
        view = app.query_one(CompareView)
        baseline = [b.record for b in view.panes["baseline"].query(ToolBlock)]
        optimized = [b.record for b in view.panes["optimized"].query(ToolBlock)]
        assert [r.reused for r in baseline if r] == [False, False], "its own repeat runs again"
        assert [r.reused for r in optimized if r] == [True], "the baseline's result"
        (block,) = view.panes["optimized"].query(ToolBlock)
        assert "reused from the other path" in str(block.title)


def test_the_context_figures_fit_at_20_columns() -> None:
    figures = StatusFigures("gemma-4-E2B-it", "optimized", "ready", "", 1234, 131072, True, "mcp 1/1")
    for width in (20, 24, 30, 40, 80, 120):
        line = figures.line(width)
        plain = line.replace("[b]", "").replace("[/b]", "").replace("\\[", "[")
        assert "1234/131072" in plain and len(plain) <= width, (width, plain)


async def test_the_gauge_shows_in_a_20_column_terminal(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(20, 12)) as pilot:
        await wait_until(pilot, lambda: app.query_one(StatusBar).context_window == 4096)
        assert "0/4096" in app.export_screenshot()


async def test_a_server_without_tokenize_is_named_in_a_notice(tmp_path: Path) -> None:
    """Item 8: the wrong-model check could not be made; the chat app says so (``ask`` prints it:
    tests/hostile/hostile_remote_cases.py)."""
    from backend.engine.remote.engine import RemoteEngine
    from tests.support.remote_standin import DEMO_MODEL, Script, Standin

    with Standin(Script(tokenize="missing")) as standin:
        app, _ = make_app(tmp_path, lambda path: RemoteEngine(standin.url, DEMO_MODEL))  # type: ignore[arg-type,return-value]
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: app.query_one(StatusBar).context_window == 4096)
            await pilot.pause(0.2)
            notices = [str(n.message) for n in app._notifications]
            assert any("has no /tokenize" in n and "was skipped" in n for n in notices), notices


async def test_a_reply_without_an_answer_says_so(tmp_path: Path) -> None:
    """Hardening round 3: a thought-only or empty reply ended silently."""
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=""))
    async with app.run_test() as pilot:
        await send(app, pilot, "say nothing")
        notes = [str(n.render()) for n in replies(app)[0].query(".note")]
    assert notes == ["The model ended its reply without any text."]


def test_a_note_for_a_reply_without_an_answer() -> None:
    from backend.gemma4.reply import empty_answer_note

    assert empty_answer_note("Hi.", "", "stop") is None
    assert empty_answer_note(" ", "hmm", "stop") == "The model thought but gave no answer."
    assert "raise --max-tokens" in str(empty_answer_note("", "long thought", "length"))


def test_a_thought_holding_details_tags_stays_in_its_collapsed_block(tmp_path: Path) -> None:
    """Hardening round 3: ``</details>`` inside a thought closed the export's collapsed block."""
    from backend.chat.conversation import Conversation
    from backend.chat.export import chat_markdown
    from backend.chat.store import ChatStore

    conversation = Conversation(ChatStore(tmp_path / "history.db"))
    conversation.add_user("hi")
    conversation.add_reply("Hello.", "optimized", None, {"thought": "a </details> and <DETAILS> here"})
    text = chat_markdown(conversation)
    assert text.count("</details>") == 1 and text.lower().count("<details>") == 1
    assert "&lt;/details> and &lt;DETAILS> here" in text


async def test_f3_with_a_path_that_cannot_start_answers_with_the_other(tmp_path: Path) -> None:
    """Hardening round 3: F3 with an unreachable baseline server sent nothing, and the baseline pane
    stayed "waiting for this path's engine to start…"."""
    engines = {
        "baseline": FakeEngine("baseline", fail_start="The server http://127.0.0.1:9 is unreachable."),
        "optimized": FakeEngine("optimized", reply="Optimized answer."),
    }
    app, _ = make_app(tmp_path, lambda p: engines[p])
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await send(app, pilot, "compare please")
        view = list(app.query(CompareView))[-1]
        baseline, optimized = view.panes["baseline"], view.panes["optimized"]
        errors = [str(e.render()) for e in baseline.query(".error")]
        shown = optimized.text
        saved = [(t.role, t.text, t.path) for t in app.conversation.turns]
    assert errors and "unreachable" in errors[0] and "did not start" in errors[0]
    assert shown == "Optimized answer."
    assert saved[-1] == ("assistant", "Optimized answer.", "optimized")


async def test_a_file_replaced_after_attach_is_sent_and_kept_as_it_is_now(tmp_path: Path) -> None:
    """Hardening round 3: the model got the image as it was at /attach, the history kept the path
    of the new one (its copy refused: the hash differed), and reopening could not load it."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore
    from tests.support.media_files import image_file

    image = image_file(tmp_path / "cat.png")
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        await _attach_by_command(app, pilot, image)
        image_file(image, width=64, height=48)  # replaced before send
        await send(app, pilot, "What is this?")
        request = engines["optimized"].requests[-1]
        notices = [str(n.message) for n in app._notifications]
        chat_id = app.conversation.chat_id
        stored = app.store.messages(chat_id)  # type: ignore[union-attr, arg-type]
    assert request.multi_modal_data["image"][0].size == (64, 48), "the file as it is now"
    assert any("changed after it was attached" in notice for notice in notices)
    kept = Path(stored[0].attachments[0])
    assert kept.parent.name == "attachments" and kept.read_bytes() == image.read_bytes()
    again = Conversation(ChatStore(tmp_path / "history.db"), chat_id)
    assert again.last_store_error is None and again.turns[0].attachments[0].detail == "64x48"
