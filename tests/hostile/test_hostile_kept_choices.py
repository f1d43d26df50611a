"""Hardening round 4 (issue 55, items 2, 7, 9, 12 and 13): the kept speculation choices.

A path the user names in ``GEMMA_CHAT_SPECULATION_CHOICES`` that is not a regular file is refused
by name and left alone (it was renamed, ``/dev/null`` included); an entry whose numbers the probe
never writes is dropped alone, named, and every other model's entry stays; two processes storing
at once merge under a lock instead of losing each other's keys."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.config import cache_json
from backend.engine.speculation import kept
from backend.engine.speculation.choice import SpeculationChoice

GOOD = {"method": "mtp", "drafts": 2, "speedup": 1.3, "speedup_low": 1.2, "speedup_high": 1.4, "runs": []}
RUN = {"method": "none", "drafts": 0, "rates": [10.0, 11.0], "histogram": []}


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "mine.txt").write_text("the user's own file")


def _null_device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null's node


NOT_FILES: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "directory": _directory,
    "null-device": _null_device,
}


@pytest.mark.parametrize("kind", sorted(NOT_FILES))
def test_a_named_path_that_is_not_a_file_is_refused_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    path = tmp_path / "choices"
    NOT_FILES[kind](path)
    before = os.lstat(path)
    monkeypatch.setenv(kept.CHOICES_ENV, str(path))
    cache_json.take_notices()
    assert kept.stored_choice("key") is None
    kept.store_choice("key", SpeculationChoice.from_json(GOOD))
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode), "the same node, untouched"
    assert not [p for p in tmp_path.iterdir() if cache_json.SET_ASIDE_SUFFIX in p.name]
    if kind == "directory":
        assert (path / "mine.txt").read_text() == "the user's own file"
    notices = cache_json.take_notices()
    assert notices and str(path) in notices[0] and "not a regular file" in notices[0]


BAD_ENTRIES = {
    "runs-rates-text": {**GOOD, "method": "none", "drafts": 0, "runs": [{**RUN, "rates": "fast"}]},
    "runs-histogram-text": {**GOOD, "runs": [{**RUN, "histogram": "1,2"}]},
    "speedup-nan": {**GOOD, "speedup": math.nan},
    "speedup-negative": {**GOOD, "speedup": -5},
    "drafts-fraction": {**GOOD, "drafts": 2.9},
    "drafts-true": {**GOOD, "drafts": True},
    "by-load-rising": {**GOOD, "by_load": [[4, 1], [8, 3]]},
    "by-load-huge": {**GOOD, "by_load": [[1e30, 2]]},
    "reason-huge": {**GOOD, "reason": "x" * 3_000_000},
}


@pytest.mark.parametrize("name", sorted(BAD_ENTRIES))
def test_a_bad_entry_is_dropped_alone_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = tmp_path / "choices.json"
    monkeypatch.setenv(kept.CHOICES_ENV, str(path))
    path.write_text(json.dumps({"bad": BAD_ENTRIES[name], "other-model": GOOD}))
    cache_json.take_notices()
    assert kept.stored_choice("bad") is None  # no crash, nothing used
    notices = cache_json.take_notices()
    assert len(notices) == 1 and "not a measured choice" in notices[0] and "dropped alone" in notices[0]
    assert len(notices[0]) < 1000
    kept_doc = json.loads(path.read_text())
    assert sorted(kept_doc) == ["other-model"], "the other model's choice stays"
    other = kept.stored_choice("other-model")
    assert other is not None and other.drafts == 2


def test_a_well_formed_schedule_and_run_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "choices.json"
    monkeypatch.setenv(kept.CHOICES_ENV, str(path))
    entry = {**GOOD, "by_load": [[4, 3], [8, 1]], "runs": [RUN, {**RUN, "method": "mtp", "drafts": 2}]}
    path.write_text(json.dumps({"k": entry}))
    choice = kept.stored_choice("k")
    assert choice is not None and choice.by_load == ((4, 3), (8, 1))


def _store_many(path: str, prefix: str) -> None:
    os.environ[kept.CHOICES_ENV] = path
    for i in range(20):
        kept.store_choice(f"{prefix}-{i}", SpeculationChoice.from_json(GOOD))


def test_two_processes_storing_at_once_keep_every_key(tmp_path: Path) -> None:
    path = str(tmp_path / "choices.json")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_store_many, args=(path, name)) for name in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert len(json.loads(Path(path).read_text())) == 40
