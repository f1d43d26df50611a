"""A 100,000-message chat opens at once and holds little (issue 64, item 10): the chat loads its
last ``HISTORY_TURNS`` turns and shows its last ``SHOWN_PAGE``; "Show earlier messages" brings a
page more each press. The work is counted, not timed: SQLite's virtual-machine steps for the
load, and the rows the app's start reads from the history, are the same for 100,000 messages as
for a thousand."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from app.tui.widgets.earlier_button import SHOWN_PAGE, EarlierButton
from app.tui.widgets.message_view import MessageView
from backend.chat.branches import branch_count, branches
from backend.chat.conversation import HISTORY_TURNS, Conversation
from backend.chat.store import ChatStore
from tests.support.tui_pilot import make_app, wait_until

LONG = 100_000


def _chat_of(path: Path, messages: int) -> int:
    """A chat of ``messages`` alternating user and assistant messages, one branch, written at once."""
    store = ChatStore(path)
    chat = store.new_chat("long")
    first = store.add_message(chat, None, "user", "message 0")
    store.close()
    db = sqlite3.connect(path)
    now = time.time()
    rows = (
        (first + i, chat, first + i - 1, "user" if i % 2 == 0 else "assistant", f"message {i}", now)
        for i in range(1, messages)
    )
    with db:
        db.executemany(
            "INSERT INTO messages(id, chat_id, parent_id, role, text, created) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        db.execute("UPDATE chats SET current_leaf = ? WHERE id = ?", (first + messages - 1, chat))
    db.close()
    return chat


def _steps_to_open(path: Path, chat: int) -> tuple[int, Conversation]:
    """SQLite's virtual-machine instructions (in thousands) spent opening the chat."""
    store = ChatStore(path)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store._db.set_progress_handler(count, 1000)
    conversation = Conversation(store, chat)
    store._db.set_progress_handler(None, 0)
    return steps[0], conversation


@pytest.fixture(scope="module")
def long_chat(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("long") / "history.db"
    return path, _chat_of(path, LONG)


def test_a_long_chat_opens_with_the_work_of_a_short_one(long_chat: tuple[Path, int], tmp_path: Path) -> None:
    path, chat = long_chat
    short = tmp_path / "short.db"
    short_steps, _ = _steps_to_open(short, _chat_of(short, 1_000))
    long_steps, conversation = _steps_to_open(path, chat)
    assert long_steps <= 2 * short_steps + 50, (long_steps, short_steps)
    assert len(conversation.turns) == HISTORY_TURNS and conversation.earlier
    assert conversation.turns[-1].text == f"message {LONG - 1}"
    assert conversation.turns[0].text == f"message {LONG - HISTORY_TURNS}"


def test_earlier_turns_come_a_page_at_a_time_in_order(long_chat: tuple[Path, int]) -> None:
    path, chat = long_chat
    conversation = Conversation(ChatStore(path), chat)
    assert conversation.load_earlier(3) == 3
    texts = [t.text for t in conversation.turns[:4]]
    assert texts == [f"message {LONG - HISTORY_TURNS - 3 + i}" for i in range(4)]
    assert conversation.earlier


def test_the_first_message_ends_the_earlier_ones(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    chat = _chat_of(path, HISTORY_TURNS + 5)
    conversation = Conversation(ChatStore(path), chat)
    assert conversation.earlier and conversation.load_earlier(50) == 5 and not conversation.earlier
    assert conversation.turns[0].text == "message 0" and conversation.load_earlier(50) == 0


def test_a_long_chats_branches_are_counted_and_previewed_without_reading_it_all(
    long_chat: tuple[Path, int],
) -> None:
    path, chat = long_chat
    store = ChatStore(path)
    assert branch_count(store, chat) == 1
    (only,) = branches(store, chat)
    assert only.messages == LONG and only.preview.startswith(f"message {LONG - 2} → message {LONG - 1}")


async def test_the_app_paints_the_last_page_and_reads_a_bounded_number_of_rows(
    long_chat: tuple[Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _chat = long_chat
    (tmp_path / "history.db").write_bytes(path.read_bytes())
    fetched = [0]
    read = ChatStore._read

    def counted(self: ChatStore, sql: str, params: tuple[object, ...] = ()) -> list[object]:
        rows = read(self, sql, params)
        fetched[0] += len(rows)
        return rows

    monkeypatch.setattr(ChatStore, "_read", counted)
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: len(app.query(MessageView)) == SHOWN_PAGE)
        assert fetched[0] <= HISTORY_TURNS + 20, fetched[0]
        button = app.query_one(EarlierButton)
        assert f"({HISTORY_TURNS - SHOWN_PAGE:,}+)" in str(button.label)
        app.messages_view.scroll_home(animate=False)  # where a reader scrolls to reach it
        await pilot.pause()
        button.press()
        await wait_until(pilot, lambda: len(app.query(MessageView)) == 2 * SHOWN_PAGE)
        views = list(app.query(MessageView))
        assert views[0].text == f"message {LONG - 2 * SHOWN_PAGE}" and views[-1].text == f"message {LONG - 1}"
