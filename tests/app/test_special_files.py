"""The failure log never blocks on a special file (issue 64, item 8): a FIFO in its place, with or
without a reader, or a device, is named in the sentence instead of waited on."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from app.failure_log import record_failure

DEADLINE_S = 20.0
"""Generous: the fixed code answers at once; the code before it never answers at all."""


def _sentence_within_deadline(log: Path) -> str:
    said: list[str] = []
    writer = threading.Thread(target=lambda: said.append(record_failure("testing", KeyError("k"), log)))
    writer.daemon = True
    writer.start()
    writer.join(DEADLINE_S)
    assert said, f"record_failure still waits on {log} after {DEADLINE_S:g} s"
    return said[0]


def test_a_fifo_without_a_reader_as_the_failure_log_does_not_block(tmp_path: Path) -> None:
    log = tmp_path / "gemma-chat-errors.log"
    os.mkfifo(log)
    sentence = _sentence_within_deadline(log)
    assert sentence.startswith("Internal error while testing: KeyError")
    assert f"the log {log} could not be written" in sentence


def test_a_fifo_with_a_reader_is_named_and_not_written(tmp_path: Path) -> None:
    log = tmp_path / "gemma-chat-errors.log"
    os.mkfifo(log)
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    try:
        sentence = _sentence_within_deadline(log)
        assert "is a named pipe (FIFO), not a regular file" in sentence, sentence
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)


def test_a_device_as_the_failure_log_is_named(tmp_path: Path) -> None:
    log = tmp_path / "gemma-chat-errors.log"
    log.symlink_to("/dev/null")
    assert "is a character device, not a regular file" in _sentence_within_deadline(log)


def test_a_regular_log_still_gets_the_traceback(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "gemma-chat-errors.log"
    sentence = _sentence_within_deadline(log)
    assert f"details in {log}" in sentence
    assert "KeyError: 'k'" in log.read_text()


def test_a_fifo_as_the_engine_log_is_refused_by_name(tmp_path: Path) -> None:
    from backend.engine.local.log import capture_stderr
    from backend.errors import EngineStartFailed

    log = tmp_path / "chat.log"
    os.mkfifo(log)
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    refused: list[str] = []

    def start() -> None:
        try:
            with capture_stderr(log):
                pass
        except EngineStartFailed as error:
            refused.append(str(error))

    try:
        opener = threading.Thread(target=start, daemon=True)
        opener.start()
        opener.join(DEADLINE_S)
        assert refused, f"capture_stderr still waits on {log} after {DEADLINE_S:g} s (or took it)"
        assert f"The engine log {log} cannot be written: it is a named pipe (FIFO)" in refused[0]
    finally:
        os.close(reader)
