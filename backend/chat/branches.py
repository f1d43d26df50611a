"""A chat's branches, and switching the one shown.

Messages form a tree: an edit or a regenerated reply starts a new branch beside the old one, and
two windows (or two processes) writing to the same chat each continue their own — the database
keeps every row and each write moves the chat's current leaf to its own branch. Every leaf is a
branch; the app lists them (Ctrl+P → Branch) so none is out of reach, and says so when a chat
with several opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.chat.store import ChatStore

PREVIEW_CHARS = 60
PREVIEW_WALK = 8
"""How far up from a leaf its preview looks for the branch's last user message."""
COUNT_LIMIT = 10_000_000


@dataclass(frozen=True)
class Branch:
    leaf_id: int
    messages: int
    """How many messages lead from the root to this leaf."""
    preview: str
    """The branch's last user message (where it differs, usually), then its last words."""


def branch_count(store: ChatStore, chat_id: int) -> int:
    """How many branches the chat has (one row per leaf, however long the chat)."""
    return len(store.leaves(chat_id))


def branches(store: ChatStore, chat_id: int) -> list[Branch]:
    """Every branch of the chat, oldest leaf first: for each, its length (a walk of ids in the
    database, up to ``COUNT_LIMIT``) and its last ``PREVIEW_WALK`` messages, never the whole chat."""
    found = []
    for leaf in store.leaves(chat_id):
        before, _ = store.branch_before(chat_id, leaf.id, PREVIEW_WALK)
        nearest_first = [leaf, *reversed(before)]
        asked = next((m.text for m in nearest_first if m.role == "user"), "")
        last = leaf.text if leaf.role != "user" else ""
        preview = " ".join((f"{asked} → {last}" if last else asked).split())
        found.append(Branch(leaf.id, store.path_length(leaf.id, COUNT_LIMIT), _short(preview)))
    return found


def show_branch(store: ChatStore, chat_id: int, leaf_id: int) -> None:
    """Make ``leaf_id``'s branch the one the chat opens on."""
    store.set_leaf(chat_id, leaf_id)


def _short(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
