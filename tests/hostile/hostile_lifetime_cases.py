"""Hardening round 2 for the hostile corpus (tests/hostile/test_hostile_inputs.py): a hard link out of an
allowed directory, a ``history.db-wal`` that is a directory, a 50 MB tool result, and two writers on
one chat. Each case's function runs in a forked child of ``tests.hostile.hostile_worker``; the process
cases (signals, orphans, MCP servers that ignore EOF) are in tests/hostile/test_hostile_lifetime.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.hostile_case import Case

BIG_RESULT_CHARS = 50 * 1024 * 1024


def lifetime_cases(d: Path) -> Iterator[Case]:
    root = d / "allowed"
    root.mkdir(parents=True)
    outside = d / "outside-secret.txt"
    outside.write_text("the secret outside")
    os.link(outside, root / "linked.txt")
    (root / "plain.txt").write_text("plain inside")
    for id, name, expect, phrases in (
        ("a hard link to a file outside", "linked.txt", "refused", ("linked.txt has 2 hard links",)),
        ("a file with one link beside it", "plain.txt", "ok", ("plain inside",)),
    ):
        yield Case(
            id, "tests.hostile.hostile_cases:read_file", [str(root), name], expect, phrases, {"timeout_s": 10}
        )
    (d / "wal").mkdir()
    yield Case(
        "history.db-wal is a directory beside a healthy database",
        "tests.hostile.hostile_lifetime_cases:wal_is_a_directory",
        [str(d / "wal" / "history.db")],
        "refused",
        ("history.db-wal is a directory", "left as it is", "not moved aside", "chat kept"),
    )
    (d / "big").mkdir()
    yield Case(
        "a 50 MB tool result",
        "tests.hostile.hostile_lifetime_cases:big_tool_result",
        [str(d / "big")],
        "ok",
        ("model read 4000", "stored copy = model's copy"),
        {"timeout_s": 60},
    )
    (d / "two").mkdir()
    yield Case(
        "two writers on one chat",
        "tests.hostile.hostile_lifetime_cases:two_writers",
        [str(d / "two" / "history.db")],
        "ok",
        ("2 branches", "from window one", "from window two"),
    )


def wal_is_a_directory(path: str) -> str:
    """A healthy history whose ``-wal`` is a directory: refused with a clear message, never moved
    aside as corrupt, and it opens again with its chat once the directory is gone."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    history = Path(path)
    store = ChatStore(history)
    Conversation(store).add_user("a chat to keep")
    store.close()
    Path(f"{history}-wal").mkdir()
    try:
        ChatStore(history)
    except Exception as error:
        moved = list(history.parent.glob("*.corrupt-*"))
        Path(f"{history}-wal").rmdir()
        again = ChatStore(history)
        kept = "chat kept" if [c.title for c in again.chats()] == ["a chat to keep"] else "chat LOST"
        raise type(error)(f"{error} ({'moved aside!' if moved else 'not moved aside'}; {kept})") from None
    return "opened"


def big_tool_result(data_dir: str) -> str:
    """An MCP-sized tool result of 50 MB: the model reads ``max_result_chars`` of it, the history
    keeps that same copy (not 50 MB), and the chat reopens in bounded memory."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore
    from backend.engine.protocol import EngineRequest, SamplingSettings
    from backend.gemma4.call_format import format_call
    from backend.gemma4.messages import ChatMessage
    from backend.tools.loop import ToolTurn
    from backend.tools.registry import ToolRegistry
    from backend.tools.runner import ToolRunner
    from backend.tools.spec import Tool
    from backend.tools.transcript import transcript_to_json
    from tests.support.fake_engine import FakeEngine

    def dump(what: str) -> str:
        """Return a very large text."""
        return what * (BIG_RESULT_CHARS // max(1, len(what)))

    engine = FakeEngine("eager", script=[format_call("dump", {"what": "x"}) + "<|tool_response>", "Done."])
    runner = ToolRunner(ToolRegistry({"dump": Tool.from_function(dump)}), policy="never")

    def build(messages: list[ChatMessage], tools: list[dict[str, object]]) -> EngineRequest:
        prompt = engine.render(messages, tools)  # type: ignore[arg-type]
        return EngineRequest(
            f"r{len(engine.requests)}", prompt.text, sampling=SamplingSettings(max_tokens=50)
        )

    turn = ToolTurn(engine, runner, [ChatMessage("user", "dump")], build, max_result_chars=4000)

    async def run() -> None:
        async for _event in turn.run():
            pass

    asyncio.run(run())
    record = turn.records[0]
    model_copy = turn.transcript[1].data["result"]  # type: ignore[index]
    history = Path(data_dir) / "history.db"
    conversation = Conversation(ChatStore(history))
    conversation.add_user("dump")
    extra = {"tools": [r.to_json() for r in turn.records], "transcript": transcript_to_json(turn.transcript)}
    conversation.add_reply(turn.final_text, "eager", None, extra)
    size = sum(p.stat().st_size for p in history.parent.glob("history.db*"))
    if size > 1024 * 1024:
        raise AssertionError(f"the history grew to {size / 1e6:.0f} MB for one tool result")
    again = Conversation(ChatStore(history), conversation.chat_id)
    stored = again.turns[-1].extra["tools"][0]["result"]  # type: ignore[index]
    if stored != model_copy or len(str(stored)) != 4000:
        raise AssertionError(f"stored {len(str(stored))} chars, the model read {len(str(model_copy))}")
    return f"model read {len(model_copy)} of {record.full_chars}; stored copy = model's copy; {size} bytes"


def two_writers(path: str) -> str:
    """Two processes (two connections) continue the same chat: it reopens on one writer's branch,
    and the other's turns are one branch away."""
    from backend.chat.branches import branches, show_branch
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    history = Path(path)
    one = Conversation(ChatStore(history))
    one.add_user("hello")
    one.add_reply("hi", "optimized", None)
    chat = one.chat_id or 0
    two = Conversation(ChatStore(history), chat)
    one.add_user("from window one")
    one.add_reply("answer one", "optimized", None)
    two.add_user("from window two")
    two.add_reply("answer two", "optimized", None)
    store = ChatStore(history)
    found = branches(store, chat)
    seen = []
    for branch in found:
        show_branch(store, chat, branch.leaf_id)
        seen.append(" / ".join(t.text for t in Conversation(store, chat).turns))
    for text in ("from window one", "from window two"):
        if not any(text in branch for branch in seen):
            raise AssertionError(f"{text!r} cannot be reached: {seen}")
    return f"{len(found)} branches: {seen}"
