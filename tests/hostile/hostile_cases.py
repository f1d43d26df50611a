"""What each hostile-input case runs (in a forked child of ``tests.hostile.hostile_worker``).

Each function takes JSON-able arguments and returns a short description of what it got; a
refusal is an exception whose text the test reads (a ``GemmaChatError``, or the ``OSError`` /
``ValueError`` a tool raises for the model to read). An ``AssertionError`` marks a case where
something the user gave was lost.
"""

from __future__ import annotations

import os
import resource
import sqlite3
from pathlib import Path
from typing import Any


def attach(path: str, limits: dict[str, Any] | None = None) -> str:
    from backend.config.settings import MediaSettings
    from backend.media.load import load_attachments

    loaded = load_attachments(path, MediaSettings(**(limits or {})))
    return "; ".join(f"{a.kind} {a.detail} {a.tokens} tokens {' '.join(a.notices)}" for a in loaded)


def parse_call(text: str) -> str:
    from backend.gemma4.call_format import parse_output

    parsed = parse_output(text)
    errors = [c.error for c in parsed.calls if c.error]
    if errors:
        raise ValueError("; ".join(errors))
    return repr([(c.name, c.arguments) for c in parsed.calls])[:300]


def calculate(expression: str) -> str:
    from backend.tools.calculator import evaluate

    return str(evaluate(expression))[:100]


def _tools(root: str) -> dict[str, Any]:
    from backend.tools.builtins import ToolContext, builtin_tools
    from backend.tools.sandbox import Sandbox

    return {t.name: t for t in builtin_tools(ToolContext(Sandbox.of([root]), max_read_bytes=4096))}


def read_file(root: str, path: str) -> str:
    return str(_tools(root)["read_file"].function(path)["content"])[:100]


def list_and_render(root: str, model_dir: str) -> str:
    """list_directory's result through the runner's JSON safety into a real chat template."""
    from backend.gemma4.messages import ChatMessage, PromptRenderer
    from backend.tools.runner import json_safe

    listing = json_safe(_tools(root)["list_directory"].function("."))
    renderer = PromptRenderer.for_model(model_dir)
    message = ChatMessage("tool", "", name="list_directory", data={"result": listing})
    prompt = renderer.render([ChatMessage("user", "list it"), message])
    names = [entry["name"] for entry in listing["entries"]]
    if not all(name in prompt.text for name in names):
        raise AssertionError(f"the listing did not reach the prompt: {names}")
    return f"{prompt.token_count} tokens: {names}"


def load_config(home: str) -> str:
    os.environ["GEMMA_CHAT_HOME"] = home
    from backend.config.settings import load_settings

    settings = load_settings()
    return f"tools.enabled={settings.tools.enabled} allowed_dirs={settings.tools.allowed_dirs}"


def open_store(path: str) -> str:
    from backend.chat.store import ChatStore

    store = ChatStore(Path(path))
    chats = store.chats()
    return f"opened, moved aside: {store.moved_aside}, {len(chats)} chats"


def _attachment(path: Path) -> Any:
    from backend.media.load import load_attachment

    return load_attachment(path)


def full_disk_then_space(data_dir: str, image: str) -> str:
    """The disk fills before the user's message is saved, then space comes back: the message,
    its attachment and the reply all reach the history, in order, under the right parents."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    history = Path(data_dir) / "history.db"
    store = ChatStore(history)
    conversation = Conversation(store)
    conversation.add_user("first, saved")
    conversation.add_reply("first answer", "optimized", None)
    attachment = _attachment(Path(image))
    used = history.stat().st_size + sum(p.stat().st_size for p in history.parent.glob("history.db*"))
    resource.setrlimit(resource.RLIMIT_FSIZE, (used // 2, resource.RLIM_INFINITY))
    conversation.add_user("second, while the disk is full", (attachment,))
    failed = conversation.last_store_error
    conversation.add_reply("second answer, still full", "optimized", None)
    if not failed:
        raise AssertionError("the full disk was not noticed")
    folder = history.parent / "attachments"
    leftovers = [p.name for p in folder.glob("*")] if folder.exists() else []
    if any(name.endswith(".partial") or name.startswith(attachment.sha256) for name in leftovers):
        raise AssertionError(f"a partial attachment copy was left: {leftovers}")
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    conversation.add_user("third, with space again")
    store.close()
    again = Conversation(ChatStore(history), conversation.chat_id)
    texts = [t.text for t in again.turns]
    expected = ["first, saved", "first answer", "second, while the disk is full", "second answer, still full"]
    if texts != [*expected, "third, with space again"]:
        raise AssertionError(f"the history lost or reordered turns: {texts}")
    if len(again.turns[2].attachments) != 1:
        raise AssertionError("the attachment of the message saved late was lost")
    return f"while full: {failed} — then all saved in order"


def locked_write(path: str) -> str:
    """Another process holds the database locked during a save: the save fails with a clear
    message, the chat stays in memory, and the next save after the lock is gone catches up."""
    from backend.chat import store as store_module
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    store_module.BUSY_TIMEOUT_S = 0.5
    store = ChatStore(Path(path))
    conversation = Conversation(store)
    conversation.add_user("before the lock")
    blocker = sqlite3.connect(path, timeout=0)
    blocker.execute("BEGIN EXCLUSIVE")
    conversation.add_user("during the lock")
    failed = conversation.last_store_error
    blocker.rollback()
    blocker.close()
    conversation.add_reply("after the lock", "optimized", None)
    texts = [m.text for m in ChatStore(Path(path)).branch(conversation.chat_id or 0)]
    if texts != ["before the lock", "during the lock", "after the lock"]:
        raise AssertionError(f"lost while locked: {texts}")
    return f"while locked: {failed} — then all saved in order"


def search_history(data_dir: str) -> str:
    """search_history in a data directory whose name holds URI characters: read-only, no stray files."""
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore
    from backend.tools.builtins import ToolContext, builtin_tools
    from backend.tools.sandbox import Sandbox

    folder = Path(data_dir)
    store = ChatStore(folder / "history.db")
    Conversation(store).add_user("find the needle here")
    store.close()
    before = sorted(p.name for p in folder.parent.iterdir())
    context = ToolContext(Sandbox.of([data_dir]), history_path=folder / "history.db")
    tool = {t.name: t for t in builtin_tools(context)}["search_history"]
    found = tool.function("needle")
    after = sorted(p.name for p in folder.parent.iterdir())
    if before != after:
        raise AssertionError(f"stray files: {sorted(set(after) - set(before))}")
    return f"{len(found)} found"


def locked_at_open(path: str) -> str:
    """A database (in rollback-journal mode) held with BEGIN EXCLUSIVE while gemma-chat starts:
    refused as locked, and never moved aside as if it were corrupt."""
    from backend.chat import store as store_module
    from backend.chat.store import ChatStore

    store_module.BUSY_TIMEOUT_S = 0.5
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE kept (x)")
    setup.commit()
    setup.execute("BEGIN EXCLUSIVE")
    try:
        ChatStore(Path(path))
    except Exception as error:
        moved = list(Path(path).parent.glob("*.corrupt-*"))
        raise type(error)(f"{error} ({'moved aside!' if moved else 'not moved aside'})") from None
    finally:
        setup.rollback()
    return "opened while locked"
