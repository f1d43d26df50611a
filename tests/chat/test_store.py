"""Chat history: chats, branches, figures, search, and the failure cases that must not lose anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backend.chat.store import ChatStore, StoreError
from backend.engine.metrics import TurnMetrics


def test_chat_round_trip_with_branches_and_figures(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "history.db")
    chat = store.new_chat("First", system_prompt="Be brief.")
    user = store.add_message(chat, None, "user", "Hello")
    figures = TurnMetrics(prompt_tokens=5, generated_tokens=7, ttft_s=0.1, decode_tokens_per_s=42.0)
    reply = store.add_message(chat, user, "assistant", "Hi!", path="optimized", metrics=figures)
    assert [m.id for m in store.branch(chat)] == [user, reply]
    edited = store.add_message(chat, None, "user", "Hello, edited")
    assert [m.text for m in store.branch(chat)] == ["Hello, edited"]
    assert {m.id for m in store.siblings(edited)} == {user, edited}, "the old branch stays reachable"
    store.set_leaf(chat, reply)
    restored = store.branch(chat)
    assert restored[-1].metrics == figures and restored[-1].path == "optimized"
    store.close()
    reopened = ChatStore(tmp_path / "history.db")
    assert reopened.last_chat() == chat
    assert reopened.chat(chat).system_prompt == "Be brief."


def test_search_rename_delete(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "h.db")
    a, b = store.new_chat("Cooking"), store.new_chat("Rust questions")
    store.add_message(b, None, "user", "What is a borrow checker?")
    assert [c.id for c in store.chats("borrow")] == [b]
    assert [c.id for c in store.chats("Cook")] == [a]
    store.rename(a, "Recipes")
    assert store.chat(a).title == "Recipes"
    store.delete_chat(b)
    assert [c.id for c in store.chats()] == [a]


def test_corrupt_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    path.write_bytes(b"this is not sqlite" * 100)
    store = ChatStore(path)
    assert store.moved_aside is not None and store.moved_aside.read_bytes().startswith(b"this is not sqlite")
    assert store.new_chat() > 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_directory_raises_a_clear_error(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "h.db")
    chat = store.new_chat()
    (tmp_path / "h.db").chmod(0o444)
    with pytest.raises(StoreError, match="stays in memory"):
        store.add_message(chat, None, "user", "x")


def test_failed_write_raises_store_error(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "h.db")
    store.close()
    with pytest.raises(StoreError, match="Could not save"):
        store.new_chat()


def test_a_withdrawn_message_leaves_the_history(tmp_path: Path) -> None:
    """Hardening round 4 (issue 55, item 8): three refused messages became three consecutive user
    turns, sent with the history next time. A message refused before sending is taken back."""
    from backend.chat.conversation import Conversation

    store = ChatStore(tmp_path / "h.db")
    conversation = Conversation(store)
    conversation.add_user("kept")
    conversation.add_reply("answer", "optimized", None)
    for _ in range(3):
        conversation.add_user("refused " * 10)
        assert conversation.withdraw_user() is not None
    assert conversation.chat_id is not None
    assert [m.text for m in store.branch(conversation.chat_id)] == ["kept", "answer"]
    assert not store.chats("refused"), "not stored anywhere"
    assert conversation.withdraw_user() is None, "an answered message is never taken back"
