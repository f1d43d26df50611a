"""Every answer from a server that is not a streamed turn (``/health``, ``/v1/models``,
``/tokenize``, ``/metrics``, ``/server_info``), read within bounds (issue 64, items 7 and 11).

A per-read timeout alone lets a server that sends one byte every few seconds hold a start for
ever, and a body read whole lets a few megabytes of gzip become gigabytes in memory. So
``read_answer`` gives the whole answer one deadline (connect, headers and body together) and reads
the body as it arrives, decompressing it here piece by piece with a cap on the bytes that come
out, so no more than ``limit`` bytes (plus one read) are ever held. Only ``gzip`` and ``deflate``
are asked for; another encoding is refused rather than decoded whole.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_ANSWER_BYTES = 8 * 2**20
"""The most an answer may hold once decompressed (a model list or a metrics page is kilobytes)."""
ASKED_ENCODINGS = "gzip, deflate"
PIECE_BYTES = 64 * 2**10
"""How much one decompression step may produce."""


class AnswerRefused(Exception):
    """An answer that passed its deadline, grew past its cap or came in an encoding not asked
    for; the text names the server's endpoint and the bound."""


@dataclass(frozen=True)
class Answer:
    """A whole, decompressed answer, read within its bounds."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` where it is not."""
        return json.loads(self.content)


async def read_answer(
    http: Any, method: str, url: str, *, total_s: float, limit: int = MAX_ANSWER_BYTES, **request: Any
) -> Answer:
    """``method url`` on the ``httpx.AsyncClient`` ``http``, whole within ``total_s`` seconds and
    at most ``limit`` bytes decompressed; ``AnswerRefused`` otherwise (``httpx.HTTPError`` where
    the connection itself fails)."""
    headers = {**request.pop("headers", {}), "Accept-Encoding": ASKED_ENCODINGS}
    try:
        return await asyncio.wait_for(_read(http, method, url, limit, headers, request), total_s)
    except TimeoutError:
        raise AnswerRefused(f"{url} did not answer within {total_s:g} s") from None


async def _read(
    http: Any, method: str, url: str, limit: int, headers: dict[str, str], request: dict[str, Any]
) -> Answer:
    async with http.stream(method, url, headers=headers, **request) as response:
        inflate = _decompressor(url, response.headers.get("content-encoding", ""))
        body = bytearray()
        async for raw in response.aiter_raw():
            for piece in _inflated(inflate, raw):
                body += piece
                if len(body) > limit:
                    raise AnswerRefused(f"{url} answered more than {_size(limit)} (decompressed)")
        return Answer(response.status_code, dict(response.headers), bytes(body))


def _decompressor(url: str, encoding: str) -> Any:
    """A zlib decompressor for the answer's encoding (None for none)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise AnswerRefused(f"{url} answered in the encoding {encoding!r}, which was not asked for")


def _inflated(inflate: Any, raw: bytes) -> Any:
    """``raw`` decompressed in pieces of at most ``PIECE_BYTES`` (so a bomb stops at the cap)."""
    if inflate is None:
        yield raw
        return
    data = raw
    while data:
        try:
            piece = inflate.decompress(data, PIECE_BYTES)
        except zlib.error as error:
            raise AnswerRefused(f"the answer is not valid compressed data ({error})") from None
        yield piece
        data = inflate.unconsumed_tail
        if not piece and not data:
            return


def _size(count: int) -> str:
    return f"{count / 2**20:g} MiB" if count >= 2**20 else f"{count:,} bytes"
