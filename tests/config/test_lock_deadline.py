"""A lock another process holds for ever never holds gemma-chat for ever (issue 64, item 9): the
footprints file's update waits ``LOCK_WAIT_S``, then goes on with a notice that names the lock file
and the process holding it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.config import cache_json, file_lock
from backend.engine.cpu import footprints

HOLD = """
import fcntl, os, sys, time
descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(descriptor, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    lock_path = tmp_path / f".{footprints.FILE_NAME}.lock"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        yield lock_path, process
    finally:
        process.kill()
        process.wait(10)


def test_a_held_footprints_lock_is_named_with_its_holder_and_not_waited_on_for_ever(
    holder: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_path, process = holder
    monkeypatch.setattr(footprints, "records_file", lambda: lock_path.parent / footprints.FILE_NAME)
    monkeypatch.setattr(cache_json, "LOCK_WAIT_S", 0.5)
    cache_json.take_notices()
    done = threading.Event()
    recorder = threading.Thread(target=lambda: (footprints.record("k", 5), done.set()), daemon=True)
    recorder.start()
    assert done.wait(30), "the update still waits on the held lock after 30 s"
    assert footprints.recorded("k") is not None  # written, unlocked
    notices = cache_json.take_notices()
    assert any(str(lock_path) in n and f"process {process.pid}" in n for n in notices), notices
    assert any(f"process {process.pid} ({sys.executable} -c" in n for n in notices), notices


def test_hold_gives_up_at_its_deadline_and_names_the_holder(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    import os

    lock_path, process = holder
    descriptor = os.open(lock_path, os.O_RDWR)
    try:
        began = time.monotonic()
        with pytest.raises(file_lock.LockHeld) as held:
            file_lock.hold(descriptor, lock_path, 0.3)
        assert time.monotonic() - began < 20
    finally:
        os.close(descriptor)
    assert held.value.holder.startswith(f"process {process.pid} (")
    assert str(lock_path) in str(held.value)
