"""UI flows of the chat app, driven with Textual's Pilot against the fake engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.tui.app import GemmaChatApp
from app.tui.screens.chats import ChatsScreen
from app.tui.screens.help import HelpScreen
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from backend.chat.store import ChatStore
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import make_app, replies, send, send_refused, wait_until


async def test_send_streams_reply_with_figures_and_stores_it(tmp_path: Path) -> None:
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Hello there")
        (reply,) = replies(app)
        assert reply.text.startswith("Hello from the fake engine")
        assert reply.metrics is not None and reply.metrics.decode_tokens_per_s == 100.0
        figures = str(reply.query_one(".figures").render())
        assert "100.0 tok/s" in figures and "TTFT 50 ms" in figures and "spec 50% accepted" in figures
        assert app.status.engine == "ready" and app.status.context_used > 0
        assert engines["optimized"].requests[0].sampling.max_tokens <= 1024
    store = ChatStore(tmp_path / "history.db")
    chat = store.last_chat()
    assert chat is not None
    assert [m.role for m in store.branch(chat)] == ["user", "assistant"]


async def test_message_sent_while_engine_starts_waits_for_it(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, start_delay_s=0.5))
    async with app.run_test() as pilot:
        assert app.pool.state("optimized").stage == "starting"
        await send(app, pilot, "Early bird")
        assert replies(app)[0].text.startswith("Hello")


async def test_escape_stops_and_keeps_partial_reply(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, delay_s=0.2, reply=" ".join(["word"] * 50)))
    async with app.run_test() as pilot:
        app.query_one(PromptInput).text = "long please"
        await pilot.press("enter")
        await pilot.pause(0.7)
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        (reply,) = replies(app)
        assert 0 < len(reply.text.split()) < 50
        assert "stopped" in str(reply.query_one(".figures").render())
        assert app.conversation.turns[-1].extra.get("status") == "stopped"


async def test_toggle_path_starts_the_other_engine(tmp_path: Path) -> None:
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("f2")
        await app.workers.wait_for_complete()
        assert app.path == "baseline" and engines["baseline"].started
        await send(app, pilot, "Which path?")
        assert replies(app)[-1].path == "baseline"


async def test_compare_mode_shows_both_paths_speedup_and_parity(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("f3")
        assert app.status.compare_next
        await send(app, pilot, "Compare this")
        view = app.query_one(CompareView)
        assert view.panes["baseline"].text == view.panes["optimized"].text
        verdict = str(view.query_one(".verdict").render())
        assert "decode 2.50x" in verdict and "identical (" in verdict
        assert not app.status.compare_next


async def test_regenerate_and_edit_keep_old_branches(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "First question")
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        assert len(replies(app)) == 1 and len(app.conversation.turns) == 2
        await pilot.press("f4")
        await pilot.pause()
        screen_input = app.screen.query_one("#answer")
        screen_input.value = "Edited question"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert [t.text for t in app.conversation.turns if t.role == "user"] == ["Edited question"]
        store = app.store
        assert store is not None and app.conversation.chat_id is not None
        users = [m for m in store.messages(app.conversation.chat_id) if m.role == "user"]
        assert {m.text for m in users} == {"First question", "Edited question"}


async def test_new_chat_chats_list_and_resume(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "About cats")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert not app.query(MessageView)
        await send(app, pilot, "About dogs")
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert isinstance(app.screen, ChatsScreen)
        await pilot.press(*"cats")
        await pilot.press("enter")
        await pilot.pause()
        assert app.conversation.title == "About cats"
    again, _ = make_app(tmp_path)
    async with again.run_test() as pilot:
        await pilot.pause()
        assert again.conversation.turns, "reopening the app resumes the last chat"


async def test_help_lists_bindings(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = [key for key, _ in app.screen.rows]
        assert {"escape", "f2", "f3", "ctrl+n"} <= set(keys)


async def test_engine_failure_is_one_sentence(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, fail_start="Not enough memory for the KV cache."))
    async with app.run_test() as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.status.engine.startswith("failed")
        await send_refused(app, pilot, "Will this work?")
        # round 4 (issue 55, item 8): kept in the input, not in the history it would be sent with
        assert app.query_one(PromptInput).text == "Will this work?" and not app.conversation.turns


async def test_dead_engine_mid_turn_is_reported_then_restarted(tmp_path: Path) -> None:
    created: list[FakeEngine] = []

    def factory(path: str) -> FakeEngine:
        created.append(FakeEngine(path, die_on_turn=not created))
        return created[-1]

    app, _ = make_app(tmp_path, factory)
    async with app.run_test() as pilot:
        await send(app, pilot, "first")
        assert "failed" in str(replies(app)[0].query_one(".figures").render())
        await send(app, pilot, "second")
        assert len(created) == 2 and replies(app)[-1].text.startswith("Hello")


async def test_exports_markdown_and_receipt(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Export me")
        markdown = app.export("markdown").read_text()
        receipt = app.export("json").read_text()
    assert "## You" in markdown and "Export me" in markdown
    assert '"engines"' in receipt and '"hardware"' in receipt and '"decode_tokens_per_s": 100.0' in receipt


@pytest.mark.parametrize("key", ["shift+enter", "ctrl+j"])
async def test_newline_keys_do_not_send(tmp_path: Path, key: str) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.focus()
        await pilot.press("a", key, "b")
        assert prompt.text == "a\nb" and not app.conversation.turns


async def test_system_prompt_reaches_the_engine(tmp_path: Path) -> None:
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("f9")
        await pilot.pause()
        app.screen.query_one("#answer").value = "You are terse."  # type: ignore[attr-defined]
        await pilot.press("enter")
        await send(app, pilot, "Hi")
        assert engines["optimized"].requests[-1].prompt.startswith("<system>You are terse.")


async def test_rename_and_delete_from_the_chats_list(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Keep me")
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("ctrl+r")
        await pilot.pause()
        app.screen.query_one("#answer").value = "Renamed chat"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert app.conversation.title == "Renamed chat"
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert app.store is not None and app.store.chats() == []
        assert not app.conversation.turns


async def test_keymap_rebinds_by_id(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, keymap={"toggle_path": "f12"})
    async with app.run_test() as pilot:
        await pilot.press("f12")
        await pilot.pause()
        assert app.path == "baseline"


async def test_copy_last_code_block(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Code please")
        await pilot.press("f8")
        await pilot.pause()
        assert app.clipboard == "print('hi')\n"


async def test_write_failure_is_shown_and_the_chat_stays_in_memory(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Saved")
        assert app.store is not None
        app.store.close()  # every later write fails, as on a full disk or a read-only directory
        await send(app, pilot, "Not saved, but kept")
        assert [t.text for t in app.conversation.turns if t.role == "user"] == [
            "Saved",
            "Not saved, but kept",
        ]
        assert app.conversation.last_store_error and "stays in memory" in app.conversation.last_store_error
        assert any("Could not save" in str(n.message) for n in app._notifications)


async def _attach_and_wait(app: GemmaChatApp, pilot: Any, count: int) -> None:
    await wait_until(pilot, lambda: len(app.pending) >= count)


async def _attach_by_command(app: GemmaChatApp, pilot: Any, path: Path) -> PromptInput:
    """``/attach PATH`` typed and sent; returns once the attachment is pending."""
    prompt, count = app.query_one(PromptInput), len(app.pending) + 1
    prompt.text = f"/attach {path}"
    prompt.focus()
    await pilot.press("enter")
    await _attach_and_wait(app, pilot, count)
    return prompt


async def test_attach_by_command_paste_and_chip_removal(tmp_path: Path) -> None:
    from textual import events

    from app.tui.widgets.attachment_bar import AttachmentBar
    from tests.support.media_files import audio_file, image_file

    image = image_file(tmp_path / "cat.png")
    audio = audio_file(tmp_path / "voice.wav", seconds=1.0)
    app, engines = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = await _attach_by_command(app, pilot, image)
        prompt.post_message(events.Paste(f"'{audio}'"))  # a terminal drop arrives as a bracketed paste
        await _attach_and_wait(app, pilot, 2)
        bar = app.query_one(AttachmentBar)
        labels = [str(chip.label) for chip in bar.query(".chip")]
        assert labels[0].startswith("Image #1 160x120 · ") and labels[1].startswith("Audio #1 0:01 · ")
        assert app.status.pending_tokens == sum(a.tokens for a in app.pending)
        await pilot.click("#chip-0")
        await pilot.pause()
        assert [a.kind for a in app.pending] == ["audio"]
        await send(app, pilot, "What is this?")
        assert engines["optimized"].requests, [str(n.message) for n in app._notifications]
        request = engines["optimized"].requests[-1]
        assert list(request.multi_modal_data) == ["audio"] and not app.pending
        stored = app.store.messages(app.conversation.chat_id)  # type: ignore[union-attr, arg-type]
        kept = Path(stored[0].attachments[0])
        assert kept.parent.name == "attachments" and kept.read_bytes() == audio.read_bytes()


async def test_bad_attachment_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = f"/attach {tmp_path / 'missing.png'}"
        prompt.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(app._notifications))
        assert "no such file" in str(list(app._notifications)[-1].message)
        assert not app.pending and not app.conversation.turns


async def test_picker_attaches_the_chosen_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.tui.screens.file_picker import FilePickerScreen
    from tests.support.media_files import image_file

    image_file(tmp_path / "pic.png")
    (tmp_path / "notes.txt").write_text("not media")
    monkeypatch.chdir(tmp_path)
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.press("ctrl+o")
        await pilot.pause(0.5)
        assert isinstance(app.screen, FilePickerScreen)
        tree = app.screen.query_one("#tree")
        names = [str(node.label) for node in tree.root.children]  # type: ignore[attr-defined]
        assert "pic.png" in names and "notes.txt" not in names
        app.screen.dismiss(tmp_path / "pic.png")
        await _attach_and_wait(app, pilot, 1)
        assert app.pending[0].kind == "image"


def test_path_completion(tmp_path: Path) -> None:
    from app.tui.widgets.prompt_input import complete_path, pasted_path

    (tmp_path / "holiday-photo.png").write_bytes(b"x")
    (tmp_path / "holiday-notes.txt").write_text("x")
    assert complete_path(str(tmp_path / "hol")) == str(tmp_path / "holiday-photo.png")
    assert pasted_path(f"file://{tmp_path}/holiday-photo.png") == tmp_path / "holiday-photo.png"
    assert pasted_path("just some text") is None


async def test_attachment_the_model_cannot_take_is_refused_before_sending(tmp_path: Path) -> None:
    from tests.support.media_files import audio_file

    audio = audio_file(tmp_path / "voice.wav", seconds=1.0)
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, modalities=frozenset({"text", "image"})))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.pool.state("optimized").ready)
        app.query_one(PromptInput).post_message(PromptInput.PathPasted(audio))
        await wait_until(pilot, lambda: len(app.pending) == 1)
        await send_refused(app, pilot, "Listen")
        assert any("cannot take audio" in str(n.message) for n in app._notifications)
        assert app.query_one(PromptInput).text == "Listen", "the prompt and its attachment stay"
        assert len(app.pending) == 1 and not app.conversation.turns


async def test_eager_path_is_the_starting_path_and_f2_leaves_it(tmp_path: Path) -> None:
    app, engines = make_app(tmp_path, path="eager")
    async with app.run_test() as pilot:
        await app.workers.wait_for_complete()
        assert app.path == "eager" and "eager" in engines
        await pilot.press("f2")
        assert app.path == "optimized"


def test_picker_preview_draws_the_image() -> None:
    from PIL import Image

    from app.tui.screens.file_picker import half_block_preview

    image = Image.new("RGB", (64, 32), (255, 0, 0))
    image.paste((0, 0, 255), (0, 16, 64, 32))
    preview = half_block_preview(image, width=8)
    lines = preview.plain.splitlines()
    assert len(lines) == 2 and all(line == "▀" * 8 for line in lines)
    styles = [span.style for span in preview.spans]
    assert str(styles[0].color.triplet.hex) == "#ff0000" and str(styles[-1].bgcolor.triplet.hex) == "#0000ff"


@pytest.mark.parametrize("blocker", ["file", "read-only"])
async def test_an_export_that_cannot_be_written_is_said_and_the_chat_kept(
    tmp_path: Path, blocker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hardening round 4 (issue 55, item 6): ``data/exports`` a file or a read-only folder ended in
    an Internal error; now the notice says where and what to do, and the chat is untouched."""
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Keep me")
        folder = (app.settings.data_dir or app.settings.history_path().parent) / "exports"
        folder.parent.mkdir(parents=True, exist_ok=True)
        if blocker == "file":
            folder.write_text("not a folder")
        else:  # as root a mode does not stop a write: the error a read-only folder gives

            def refuse(path: Path, *args: object, **kwargs: object) -> int:
                raise PermissionError(13, "Permission denied", str(path))

            monkeypatch.setattr(Path, "write_text", refuse)
        notices: list[str] = []
        app.notify = lambda message, **_: notices.append(str(message))  # type: ignore[method-assign]
        assert app.try_export("markdown") is None
        monkeypatch.undo()
        assert notices[-1].startswith("Not exported: ") and "data_dir" in notices[-1]
        assert str(folder) in notices[-1] or blocker == "read-only"
        assert app.conversation.turns[0].text == "Keep me"
