"""What a remote engine trusts a vLLM server for, checked: its ``/v1/models`` answer, and how long
each read of a streaming turn may take.

Every server answer is validated, and a bad one is refused with a message that names the server
and the endpoint (a web page where the API should be, a JSON list, no ``max_model_len``, a
``max_model_len`` that is not a whole number). Every read of a turn has a deadline
(``Deadlines``): the first chunk (the server's queue and prefill), each next chunk, and the whole
turn; ``ChunkReader`` enforces them and ``RemoteEngine`` also enforces the reply budget itself, so
a server that never stops ends at ``max_tokens`` with a message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from backend.errors import EngineStartFailed

SERVER_FIX = "Check the URL: it must be a vLLM server (`vllm serve` or `gemma-chat serve`), not a web page."
ANSWER_FIX = (
    "Check the URL: it must be a vLLM server (`vllm serve` or `gemma-chat serve`) that answers "
    "promptly, not a proxy or a page that trickles or inflates its answer."
)


@dataclass(frozen=True)
class Deadlines:
    """How long a remote turn may wait, in seconds."""

    first_chunk_s: float = 300.0
    """From sending the request to its first chunk (a busy server's queue plus a long prefill)."""
    between_chunks_s: float = 60.0
    """From one chunk to the next once the reply streams."""
    turn_s: float = 3600.0
    """The whole turn, however steadily it streams."""
    answer_s: float = 30.0
    """Each answer that is not a turn (``/health``, ``/v1/models``): connect, headers and body
    together, however steadily it trickles."""


class ServerSilent(Exception):
    """A deadline of ``Deadlines`` passed; the text says which."""


def check_status(url: str, endpoint: str, status: int) -> None:
    """A refused key (401, 403) or another error status on ``endpoint``, refused by name."""
    if status in (401, 403):
        raise EngineStartFailed(
            f"The vLLM server at {url} refused the API key ({status} on {endpoint}).",
            "Pass the server's key with --api-key or GEMMA_CHAT_API_KEY.",
        )
    if status != 200 and endpoint == "/health":
        raise EngineStartFailed(
            f"The vLLM server at {url} answered /health with {status}: it is not ready, or no vLLM server.",
            "Check that `vllm serve` (or `gemma-chat serve`) runs there and has finished starting.",
        )
    if status != 200:
        raise EngineStartFailed(f"The vLLM server at {url} answered {endpoint} with {status}.", SERVER_FIX)


def served_model(url: str, answer: Any) -> tuple[str, int]:
    """``(model id, max_model_len)`` from a ``/v1/models`` answer, or ``EngineStartFailed``."""
    where = f"The vLLM server at {url} answered /v1/models"
    try:
        doc = answer.json()
    except ValueError:
        kind = answer.headers.get("content-type", "no content type")
        start = " ".join(answer.text[:60].split())
        problem = f"{where} with something that is not JSON ({kind}: {start!r})."
        raise EngineStartFailed(problem, SERVER_FIX) from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise EngineStartFailed(
            f"{where} with JSON that is not a model list ({_shape(doc)}; expected "
            '{"data": [{"id": …, "max_model_len": …}]}).',
            SERVER_FIX,
        )
    entry = data[0]
    model = entry.get("id")
    if not isinstance(model, str) or not model:
        raise EngineStartFailed(f"{where} with a model that has no id.", SERVER_FIX)
    length = entry.get("max_model_len")
    if length is None:
        raise EngineStartFailed(
            f"{where} without the model's context window (max_model_len) for {model!r}.",
            "gemma-chat needs it to fit prompts; vLLM servers send it (other OpenAI-compatible "
            "servers may not).",
        )
    if isinstance(length, bool) or not isinstance(length, int | str) or not str(length).isdigit():
        raise EngineStartFailed(
            f"{where} with max_model_len {length!r} for {model!r}, which is not a whole number of tokens.",
            SERVER_FIX,
        )
    if int(length) < 1:
        raise EngineStartFailed(f"{where} with max_model_len {length} for {model!r}.", SERVER_FIX)
    return model, int(length)


def _shape(doc: Any) -> str:
    if isinstance(doc, dict):
        return "an object with " + (", ".join(sorted(map(str, doc))[:5]) or "no keys")
    return f"a JSON {type(doc).__name__.replace('dict', 'object')}"


class ChunkReader:
    """The chunks of one streaming answer, each within its deadline."""

    def __init__(self, deadlines: Deadlines, url: str) -> None:
        self.deadlines = deadlines
        self.url = url
        self.started = time.monotonic()
        self.chunks = 0

    def _limit(self) -> tuple[float, str]:
        d = self.deadlines
        now = time.monotonic()
        left = self.started + d.turn_s - now
        if self.chunks == 0:
            step = self.started + d.first_chunk_s - now
            what = f"sent nothing within {d.first_chunk_s:g} s of the request"
        else:
            step = d.between_chunks_s
            what = f"stopped sending (nothing for {d.between_chunks_s:g} s)"
        if left < step:
            step, what = left, f"did not finish within the whole turn's limit of {d.turn_s:g} s"
        return max(step, 0.0), what

    async def first(self, opening: Any) -> Any:
        """Await the request itself (until the server's headers) within the first chunk's deadline."""
        limit, what = self._limit()
        try:
            return await asyncio.wait_for(opening, limit)
        except TimeoutError:
            raise ServerSilent(f"The server at {self.url} {what}.") from None

    async def each(self, stream: Any) -> AsyncIterator[Any]:
        iterator = stream.__aiter__()
        while True:
            limit, what = self._limit()
            try:
                chunk = await asyncio.wait_for(iterator.__anext__(), limit)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise ServerSilent(f"The server at {self.url} {what}.") from None
            self.chunks += 1
            yield chunk
