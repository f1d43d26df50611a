"""A scripted OpenAI-compatible stand-in for a vLLM server, on 127.0.0.1 in a background thread:
what ``RemoteEngine`` asks of a server (``/health``, ``/v1/models``, ``/tokenize``, streamed
``/v1/completions``), for the hostile corpus's remote cases (``tests/hostile/hostile_remote_cases.py``)
and end-to-end runs of the client (``tests/gemma4/test_published_template_ask.py``).

``Script`` says how each endpoint misbehaves, or what it replies: with ``replies`` the n-th
completion request gets the n-th text, streamed a few characters a chunk with token ids, and every
prompt received is kept in ``prompts`` (the engine's warm-up request, its fixed prompt, gets a short
reply of its own and is not counted). It tokenizes with the demo model's own ``tokenizer.json``
unless given a ``tokenizer``, so the wrong-model check passes unless the script says otherwise.
Every loop it runs is bounded (an "endless" stream stops after ``MAX_CHUNKS`` or when the client
leaves; a "silent" answer after ``SILENCE_S``), so nothing outlives a case.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEMO_MODEL = Path(__file__).resolve().parents[2] / "assets" / "demo" / "model"
MAX_CHUNKS = 20_000
SILENCE_S = 60.0
TRICKLE_S = 0.5
BOMB_BYTES = 256 * 2**20


@dataclass
class Script:
    health: str = "ok"
    """ok, key (401: the API key refused)"""
    models: str = "ok"
    """ok, html, list, no_len, lots, trickle (a byte every ``TRICKLE_S``), bomb (gzip of
    ``BOMB_BYTES``)"""
    tokenize: str = "ok"
    """ok, missing (404), html"""
    server_info: str = "missing"
    """missing, html"""
    completion: str = "ok"
    """ok, silent (headers, then nothing), endless, no_finish, escapes"""
    token_ids: bool = True
    """Send each chunk's token ids (vLLM's ``return_token_ids``); other servers do not."""
    text: list[str] = field(default_factory=lambda: ["Hello", " there", "."])
    replies: list[str] | None = None
    """One reply per completion request, in order (None: ``completion`` and ``text`` decide)."""
    tokenizer: Callable[[str], list[int]] | None = None
    """Token ids for a text (None: the demo model's tokenizer)."""
    max_model_len: int = 4096
    seen: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    """The prompts of the completion requests ``replies`` answered."""


class Standin:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        if script.tokenizer is not None:
            self._tokenize = script.tokenizer
        else:
            from tokenizers import Tokenizer

            demo = Tokenizer.from_file(str(DEMO_MODEL / "tokenizer.json"))
            self._tokenize = lambda text: list(demo.encode(text, add_special_tokens=False).ids)

    @property
    def prompts(self) -> list[str]:
        return self.script.prompts

    def __enter__(self) -> Standin:
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None:
            ended = asyncio.run_coroutine_threadsafe(_end_answers(), self._loop)
            ended.result(10)  # answers still trickling or silent end in their loop, not after it
            self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1].split("?")[0]
            length = next((int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")), 0)
            body = json.loads(await reader.readexactly(length)) if length else {}
            self.script.seen.append(path)
            await self._answer(path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        s = self.script
        if path == "/health":
            return _send(writer, 401 if s.health == "key" else 200, "")
        if path == "/v1/models" and s.models in ("trickle", "bomb"):
            return await (_trickle(writer) if s.models == "trickle" else _bomb(writer))
        if path == "/v1/models":
            entry: dict[str, Any] = {
                "id": str(DEMO_MODEL),
                "object": "model",
                "max_model_len": s.max_model_len,
            }
            if s.models == "html":
                return _send(writer, 200, "<html><body>Welcome to nginx!</body></html>", "text/html")
            if s.models == "list":
                return _send(writer, 200, json.dumps([entry]))
            if s.models == "no_len":
                del entry["max_model_len"]
            if s.models == "lots":
                entry["max_model_len"] = "lots"
            return _send(writer, 200, json.dumps({"object": "list", "data": [entry]}))
        if path == "/tokenize" and s.tokenize != "missing":
            if s.tokenize == "html":
                return _send(writer, 200, "<html>not here</html>", "text/html")
            ids = self._tokenize(str(body.get("prompt", "")))
            answer = {"tokens": ids, "count": len(ids), "max_model_len": s.max_model_len}
            return _send(writer, 200, json.dumps(answer))
        if path == "/server_info" and s.server_info == "html":
            return _send(writer, 200, "<html>dev mode off</html>", "text/html")
        if path in ("/v1/completions", "/v1/chat/completions") and s.replies is not None:
            return await self._reply(writer, str(body.get("prompt", "")))
        if path in ("/v1/completions", "/v1/chat/completions"):
            return await self._stream(writer, int(body.get("max_tokens") or 16))
        return _send(writer, 404, json.dumps({"error": {"message": "Not Found"}}))

    async def _stream(self, writer: asyncio.StreamWriter, max_tokens: int) -> None:
        s = self.script
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            b"cache-control: no-cache\r\n\r\n"
        )
        await writer.drain()
        if s.completion == "silent":
            await asyncio.sleep(SILENCE_S)
            return
        pieces = s.text
        if s.completion == "escapes":
            pieces = ["Look:", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;pwned\x07"]
            pieces += ["\x1b[2J\x1b[H", "\r", "done"]
        count = MAX_CHUNKS if s.completion == "endless" else len(pieces)
        for index in range(count):
            piece = pieces[index % len(pieces)]
            last = index == count - 1 and s.completion not in ("endless", "no_finish")
            choice: dict[str, Any] = {"index": 0, "text": piece, "logprobs": None}
            if s.token_ids:
                choice["token_ids"] = [100 + index % 50]
            choice["finish_reason"] = "stop" if last else None
            await _event(writer, {"id": "c", "object": "text_completion", "created": 0, "model": "m",
                                  "choices": [choice]})  # fmt: skip
            await asyncio.sleep(0.001)
        if s.completion not in ("endless", "no_finish"):
            await _event(writer, "[DONE]")

    async def _reply(self, writer: asyncio.StreamWriter, prompt: str) -> None:
        """The script's next reply to ``prompt``, 7 characters a chunk, each with its token ids."""
        from backend.engine.session.warmup import WARM_UP_PROMPT

        s = self.script
        assert s.replies is not None
        if WARM_UP_PROMPT in prompt:
            reply = "Warm."
        else:
            s.prompts.append(prompt)
            index = len(s.prompts) - 1
            reply = s.replies[index] if index < len(s.replies) else "(the script has no more replies)"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        pieces = [reply[i : i + 7] for i in range(0, len(reply), 7)] or [""]
        for number, piece in enumerate(pieces):
            choice: dict[str, Any] = {
                "index": 0,
                "text": piece,
                "token_ids": self._tokenize(piece) if piece else [],
                "finish_reason": "stop" if number == len(pieces) - 1 else None,
            }
            if number == 0:
                choice["prompt_token_ids"] = self._tokenize(prompt)
            await _event(writer, {"id": "cmpl-1", "object": "text_completion", "model": "scripted",
                                  "choices": [choice]})  # fmt: skip
        await _event(writer, "[DONE]")


async def _event(writer: asyncio.StreamWriter, data: Any) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    writer.write(f"data: {text}\n\n".encode())
    await writer.drain()


def _send(writer: asyncio.StreamWriter, status: int, body: str, kind: str = "application/json") -> None:
    data = body.encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {len(data)}\r\n"
        f"connection: close\r\n\r\n".encode()
        + data
    )


async def _end_answers() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _trickle(writer: asyncio.StreamWriter) -> None:
    """Headers for a long JSON body, then one byte of it every ``TRICKLE_S`` (for ``SILENCE_S``)."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{")
    await writer.drain()
    for _ in range(int(SILENCE_S / TRICKLE_S)):
        await asyncio.sleep(TRICKLE_S)
        writer.write(b" ")
        await writer.drain()


async def _bomb(writer: asyncio.StreamWriter) -> None:
    """``BOMB_BYTES`` of spaces, gzip-compressed to about a thousandth of that."""
    body = _bomb_body()
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


@functools.cache
def _bomb_body() -> bytes:
    import gzip
    import io

    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as packed:
        for _ in range(BOMB_BYTES // 2**20):
            packed.write(b" " * 2**20)
    return out.getvalue()
