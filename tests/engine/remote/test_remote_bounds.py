"""A server that trickles, inflates or refuses the key is refused by name within a deadline
(issue 64, items 7, 11 and 27): the scripted stand-in on 127.0.0.1 (``tests/support/remote_standin.py``)."""

from __future__ import annotations

import asyncio
import gzip
import time
import zlib

import pytest

from backend.engine.remote.answers import PIECE_BYTES, AnswerRefused, _inflated
from backend.engine.remote.checks import Deadlines
from backend.engine.remote.engine import RemoteEngine
from backend.errors import EngineStartFailed
from tests.support.remote_standin import DEMO_MODEL, Script, Standin

BACKSTOP_S = 30.0
"""Far past each deadline below: the code before the fix waits out the stand-in's whole trickle."""


def _start_failure(script: Script, deadlines: Deadlines) -> tuple[str, float]:
    async def start(url: str) -> None:
        engine = RemoteEngine(url, DEMO_MODEL, deadlines=deadlines)
        try:
            await asyncio.wait_for(engine.start(), BACKSTOP_S)
        finally:
            await engine.shutdown()

    with Standin(script) as standin:
        began = time.monotonic()
        with pytest.raises(EngineStartFailed) as refused:
            asyncio.run(start(standin.url))
    return str(refused.value), time.monotonic() - began


def test_a_models_answer_that_trickles_a_byte_at_a_time_meets_a_whole_answer_deadline() -> None:
    message, took = _start_failure(Script(models="trickle"), Deadlines(answer_s=2.0))
    assert "/v1/models did not answer within 2 s" in message, message
    assert took < BACKSTOP_S / 2


def test_a_gzip_bomb_is_refused_at_the_cap_on_decompressed_bytes() -> None:
    message, _ = _start_failure(Script(models="bomb"), Deadlines())
    assert "/v1/models answered more than 8 MiB (decompressed)" in message, message


def test_a_401_on_health_says_the_key_was_refused() -> None:
    message, _ = _start_failure(Script(health="key"), Deadlines())
    assert "refused the API key (401 on /health)" in message, message
    assert "cannot be reached" not in message


def test_a_bomb_decompresses_in_bounded_pieces() -> None:
    bomb = gzip.compress(b"\0" * (64 * 2**20))
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    sizes = [len(piece) for piece in _inflated(inflate, bomb)]
    assert max(sizes) <= PIECE_BYTES and sum(sizes) == 64 * 2**20


def test_broken_compressed_data_is_refused_with_a_message() -> None:
    with pytest.raises(AnswerRefused, match="not valid compressed data"):
        list(_inflated(zlib.decompressobj(16 + zlib.MAX_WBITS), b"not gzip at all"))
