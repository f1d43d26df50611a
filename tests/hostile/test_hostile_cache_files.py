"""Hardening round 3 (issue 46, items 2, 5 and 13): the app's own cache files are input. A FIFO, a
device, a directory, a deep or broken JSON document, or values the writer never writes, in place of
``engine-starts.json``, ``engine-env.json`` (item 2) or ``speculation-choices.json`` (item 5): read
in bounded time and memory, set aside (renamed, not deleted) with a notice naming the file, and
written anew afterwards. A cache folder the engine cannot write (a read-only ``VLLM_CACHE_ROOT``)
is named with the variable to point elsewhere (item 13)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.config import cache_json
from backend.engine.local.log import diagnose
from backend.engine.local.start_env import StartEnv
from backend.engine.session.start_history import StartHistory
from backend.engine.speculation import kept as choice


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _deep(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _garbage(path: Path) -> None:
    path.write_bytes(b"\xff\xfe{not json")


def _large(path: Path) -> None:
    path.write_text(json.dumps({"k": "x" * (cache_json.MAX_BYTES + 1)}))


HOSTILE: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "dev-zero": _zero,
    "directory": _directory,
    "deep": _deep,
    "garbage": _garbage,
    "too-large": _large,
}


def _within(seconds: float, work: Callable[[], object]) -> object:
    """``work()``'s result, failing (not hanging) where it takes longer than ``seconds``."""
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():  # unblock a reader stuck on the FIFO, then fail
        pytest.fail(f"still reading after {seconds} s")
    return box[0]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("reader", ["engine-starts", "engine-env"])
def test_a_hostile_cache_file_is_set_aside_named_and_written_anew(
    tmp_path: Path, kind: str, reader: str
) -> None:
    path = tmp_path / f"{reader}.json"
    HOSTILE[kind](path)
    cache_json.take_notices()
    began = time.monotonic()
    if reader == "engine-starts":
        history = StartHistory(path)
        assert _within(5, lambda: history.expected_s("demo")) is None
        _within(5, lambda: history.record("demo", 12.5))
        assert history.expected_s("demo") == 12.5
    else:
        env = StartEnv(path)
        assert _within(5, lambda: env.changes("demo")) is None
        _within(5, lambda: env.record("demo", {"OMP_NUM_THREADS": "2"}))
        assert env.changes("demo") == {"OMP_NUM_THREADS": "2"}
    assert time.monotonic() - began < 5
    notices = cache_json.take_notices()
    assert len(notices) == 1 and str(path) in notices[0] and "set aside" in notices[0]
    assert path.is_file() and not path.is_symlink(), "a new file in its place"
    assert [p for p in tmp_path.iterdir() if cache_json.SET_ASIDE_SUFFIX in p.name], "kept, renamed"


GOOD = {
    "method": "mtp",
    "drafts": 2,
    "speedup": 1.3,
    "speedup_low": 1.2,
    "speedup_high": 1.4,
    "runs": [],
}


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({**GOOD, "drafts": 1_000_000}, "drafts 1000000 is outside 1..8"),
        ({**GOOD, "drafts": -3}, "drafts -3 is outside 1..8"),
        ({**GOOD, "method": "eagle9"}, "method 'eagle9' is none of"),
        ({**GOOD, "attention": "{not json"}, "Expecting property name"),
        ({**GOOD, "drafts": "many"}, "drafts 'many' is not an integer"),
        ("mtp", "not an object"),
    ],
    ids=["drafts-huge", "drafts-negative", "unknown-method", "attention-text", "drafts-text", "not-object"],
)
def test_a_speculation_choice_the_probe_never_writes_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: object, said: str
) -> None:
    monkeypatch.setattr(choice.locations, "cache_dir", lambda: tmp_path)
    monkeypatch.delenv(choice.CHOICES_ENV)
    path = tmp_path / choice.CHOICES_FILE
    path.write_text(json.dumps({"key": entry}))
    cache_json.take_notices()
    assert choice.stored_choice("key") is None
    notices = cache_json.take_notices()
    assert len(notices) == 1 and str(path) in notices[0] and said in notices[0]
    assert "key" not in json.loads(path.read_text()), "dropped (alone, round 4): planned without it"
    path.write_text(json.dumps({"key": GOOD}))
    stored = choice.stored_choice("key")
    assert stored is not None and (stored.method, stored.drafts) == ("mtp", 2)
    assert not cache_json.take_notices()


def test_a_read_only_cache_folder_is_named_with_what_to_do() -> None:
    """Hardening round 3: a read-only VLLM_CACHE_ROOT ended in a bare ``OSError [Errno 30]``."""
    error = OSError(30, "Read-only file system")
    log = "OSError: [Errno 30] Read-only file system: '/ro/vllm/torch_compile_cache/abc'\n"
    found = diagnose(error, log, Path("/logs/engine.log"))
    assert found.problem == (
        "The engine could not write /ro/vllm/torch_compile_cache/abc: Read-only file system."
    )
    assert "VLLM_CACHE_ROOT" in found.fix and "/logs/engine.log" in found.fix
