"""A scripted OpenAI-compatible completions server on 127.0.0.1, for end-to-end runs of the client.

It answers what ``RemoteEngine`` asks of a vLLM server (``/health``, ``/v1/models``,
``/tokenize``, streamed ``/v1/completions``) with scripted replies: the n-th completion request
gets the n-th text of ``script``, streamed a few characters a chunk with token ids from the local
tokenizer, then a finish reason and ``[DONE]``. Every prompt it received is kept in ``prompts``, so
a test can read what the client's chat template rendered. The engine's warm-up request (its
fixed prompt, ``backend.engine.warmup``) gets a short reply of its own and is not counted. It
stops with ``close()``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Tokenize = Callable[[str], list[int]]


class ScriptedServer:
    def __init__(self, script: list[str], tokenize: Tokenize, max_model_len: int = 4096) -> None:
        self.script = list(script)
        self.prompts: list[str] = []
        self.tokenize = tokenize
        self.max_model_len = max_model_len
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, prompt: str) -> str:
        from backend.engine.warmup import WARM_UP_PROMPT

        if WARM_UP_PROMPT in prompt:
            return "Warm."
        self.prompts.append(prompt)
        index = len(self.prompts) - 1
        return self.script[index] if index < len(self.script) else "(the script has no more replies)"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return None

            def _json(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._json({})
                elif self.path.startswith("/v1/models"):
                    model = {"id": "scripted", "object": "model", "max_model_len": server.max_model_len}
                    self._json({"object": "list", "data": [model]})
                else:
                    self._json({"error": "not found"}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/tokenize":
                    tokens = server.tokenize(str(body.get("prompt", "")))
                    self._json(
                        {"tokens": tokens, "count": len(tokens), "max_model_len": server.max_model_len}
                    )
                elif self.path == "/v1/completions":
                    self._stream(str(body.get("prompt", "")))
                else:
                    self._json({"error": "not found"}, 404)

            def _stream(self, prompt: str) -> None:
                reply = server._next_reply(prompt)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                prompt_ids = server.tokenize(prompt)
                pieces = [reply[i : i + 7] for i in range(0, len(reply), 7)] or [""]
                for number, piece in enumerate(pieces):
                    choice: dict[str, Any] = {
                        "index": 0,
                        "text": piece,
                        "token_ids": server.tokenize(piece) if piece else [],
                        "finish_reason": "stop" if number == len(pieces) - 1 else None,
                    }
                    if number == 0:
                        choice["prompt_token_ids"] = prompt_ids
                    chunk = {
                        "id": "cmpl-1",
                        "object": "text_completion",
                        "model": "scripted",
                        "choices": [choice],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler
