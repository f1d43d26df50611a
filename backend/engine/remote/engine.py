"""An engine on a vLLM server (``vllm serve``, one GPU box, several GPUs or a Ray cluster), behind
the same ``Engine`` protocol as the in-process one.

Prompts are rendered here, with the model's own chat template (so tools, history and parity work
unchanged), and sent to ``/v1/completions`` with ``add_special_tokens=false`` (the template has
``<bos>``), ``skip_special_tokens=false``, an explicit ``max_tokens`` and ``return_token_ids``: each
chunk carries its new token ids (the first also the prompt's, which ``start`` compares with local
tokenization). Figures while streaming are measured here (labelled client-side); when the stream
ends, the server's own per-request timings replace them where it sends them
(``--enable-per-request-metrics``). KV-cache use (polled about once a second while streaming) and
speculative acceptance (its counters before and after the turn: server-wide, so exact only for
one request at a time) come from ``/metrics``; the parallel layout from ``/server_info`` where the
server offers it. Closing the stream aborts the request on the server. The OpenAI client never
retries (``max_retries=0``): a failed turn is never generated twice. A turn with images or audio
goes to ``/v1/chat/completions`` as data URLs with the same rendered prompt
(``backend.engine.remote.media``); a video is refused before sending, with a message.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from backend.engine.protocol import (
    Cancelled,
    Delta,
    EngineInfo,
    EngineRequest,
    Failed,
    Finished,
    MetricsUpdate,
    ProgressCallback,
    Started,
    TurnEvent,
)
from backend.engine.remote.answers import AnswerRefused, read_answer
from backend.engine.remote.checks import (
    ANSWER_FIX,
    ChunkReader,
    Deadlines,
    ServerSilent,
    check_status,
    served_model,
)
from backend.engine.remote.media import MediaNotSendable, media_parts
from backend.engine.remote.server_http import (
    GaugePoller,
    server_parallel,
    server_tokens,
    with_server_gauges,
)
from backend.engine.remote.wire import (
    chat_args,
    choice_text,
    client_metrics,
    completion_args,
    final_metrics,
    plain,
)
from backend.engine.tokenizer_check import TokenizerDivergence, first_divergence
from backend.errors import EngineStartFailed
from backend.gemma4.messages import ChatMessage, PromptRenderer, RenderedPrompt

CONNECT_TIMEOUT_S = 10.0
TOKENIZER_SAMPLE = "Déjà vu: 3 × 7 = 21, isn't it? <b>print('日本語')</b>"
"""Rendered and tokenized on both sides at connect time (accents, digits, markup, CJK)."""


class RemoteEngine:
    """One engine path served by a vLLM server at ``url`` (``http://host:port``)."""

    def __init__(
        self,
        url: str,
        tokenizer_dir: Path | None,
        api_key: str | None = None,
        name: str = "",
        deadlines: Deadlines | None = None,
        model_problem: str = "",
    ) -> None:
        self.url = url.rstrip("/").removesuffix("/v1")
        self.tokenizer_dir = tokenizer_dir
        self.model_problem = model_problem
        """Why the ``--model`` given is no tokenizer folder ("" where none was given, or it is one)."""
        self.api_key = api_key
        self.name = name
        self.deadlines = deadlines or Deadlines()
        self.info: EngineInfo | None = None
        self.served_model = ""
        self._client: Any = None
        self._http: Any = None
        self._renderer: PromptRenderer | None = None
        self._streams: dict[str, Any] = {}
        self._cancelled: set[str] = set()
        self.described: dict[str, Any] = {"server": self.url}
        """What the server said about itself at the last start (kept after ``shutdown``)."""
        self.tokenizer_note = ""
        """Set at start when the wrong-model check could not be made (no ``/tokenize``)."""
        self.last_prompt_token_ids: tuple[int, ...] = ()
        """The prompt as the server tokenized it, from the last turn's first chunk."""

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        if self.info is not None:
            return self.info
        import httpx
        from openai import AsyncOpenAI

        say = progress or (lambda _stage: None)
        say(f"connecting to {self.url}")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        within = self.deadlines.answer_s
        try:
            async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT_S, headers=headers) as http:
                health = await read_answer(http, "GET", f"{self.url}/health", total_s=within)
                check_status(self.url, "/health", health.status_code)
                models = await read_answer(http, "GET", f"{self.url}/v1/models", total_s=within)
        except httpx.HTTPError as error:
            raise EngineStartFailed(
                f"The vLLM server at {self.url} cannot be reached ({_http_reason(error)}).",
                "Check that `vllm serve` (or `gemma-chat serve`) runs there and the URL is right.",
            ) from None
        except AnswerRefused as error:
            raise EngineStartFailed(f"The server at {error}.", ANSWER_FIX) from None
        check_status(self.url, "/v1/models", models.status_code)
        self.served_model, max_len = served_model(self.url, models)
        tokenizer = self.tokenizer_dir or Path(self.served_model)
        if (
            not (tokenizer / "tokenizer_config.json").is_file()
            and not (tokenizer / "tokenizer.json").is_file()
        ):
            given = f" {self.model_problem}" if self.model_problem else ""
            raise EngineStartFailed(
                f"The server serves {self.served_model!r}, and its chat template is not on this "
                f"machine.{given}",
                "Pass --model DIR, a folder with that model's tokenizer files (the weights are not "
                "needed here).",
            )
        import asyncio

        self._renderer = await asyncio.to_thread(PromptRenderer.for_model, str(tokenizer))
        longest = max(self.deadlines.first_chunk_s, self.deadlines.between_chunks_s) + CONNECT_TIMEOUT_S
        self._client = AsyncOpenAI(
            base_url=f"{self.url}/v1",
            api_key=self.api_key or "none",
            max_retries=0,
            timeout=longest,  # a backstop: ChunkReader times each read
        )
        self._http = httpx.AsyncClient(timeout=CONNECT_TIMEOUT_S, headers=headers)
        await self._check_tokenizer(tokenizer, say)
        parallel = await server_parallel(self._http, self.url)
        unchecked = {"tokenizer_check": "skipped: no usable /tokenize"} if self.tokenizer_note else {}
        self.info = EngineInfo(
            model=self.served_model,
            max_model_len=max_len,
            modalities=_modalities(tokenizer),
            engine_args={"server": self.url, "served_model": self.served_model, **parallel, **unchecked},
        )
        self.described = dict(self.info.engine_args)
        say("ready")
        return self.info

    async def _check_tokenizer(self, tokenizer: Path, say: ProgressCallback) -> None:
        """A wrong model (the server's tokenizer is not the local copy's) is refused at connect
        time: every prompt rendered here would reach the model as other tokens. A server without
        ``/tokenize`` cannot be checked, and the user is told so."""
        sample = self.render([ChatMessage("user", TOKENIZER_SAMPLE)]).text
        served = await self.server_prompt_token_ids(sample)
        if served is None:
            self.tokenizer_note = (
                f"note: the server at {self.url} has no usable /tokenize, so the check that it serves "
                "this model (the same tokenizer) was skipped"
            )
            say(self.tokenizer_note)
            return
        local = self.prompt_token_ids(sample)
        index = first_divergence(served, local)
        if index is None:
            return
        divergence = TokenizerDivergence(len(served), len(local), index)
        await self.shutdown()
        raise EngineStartFailed(
            f"The vLLM server at {self.url} serves {self.served_model!r}, whose tokenizer differs from "
            f"the one here ({tokenizer}; a sample prompt: {divergence.served} vs {divergence.local} "
            f"tokens, first difference at token {divergence.index}): prompts rendered here would "
            "reach it as other tokens.",
            "Pass --model DIR with the served model's own tokenizer files.",
        )

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        rid = request.request_id
        if self._client is None:
            yield Failed(rid, "The server engine is not connected; start it first.", "not_running")
            return
        parts: list[dict[str, Any]] | None = None
        if request.multi_modal_data:
            try:
                parts = media_parts(request.prompt, request.multi_modal_data)
            except MediaNotSendable as error:
                yield Failed(rid, str(error), "rejected")
                return
        import openai

        text: list[str] = []
        token_ids: list[int] = []
        prompt_ids: list[int] = []
        finish_reason = ""
        budget, received = request.sampling.max_tokens, 0
        problem = ""
        server_metrics: dict[str, Any] | None = None
        gauges = GaugePoller(self._http, self.url)
        before = await gauges.read()  # before the clock starts: the turn's figures exclude it
        started = time.perf_counter()
        first: float | None = None
        last = started
        reader = ChunkReader(self.deadlines, self.url)
        yield Started(rid)
        try:
            if parts is None:
                opening = self._client.completions.create(**completion_args(self.served_model, request))
            else:
                chat = chat_args(self.served_model, request, parts)
                opening = self._client.chat.completions.create(**chat)
            stream = await reader.first(opening)
            self._streams[rid] = stream
            async for chunk in reader.each(stream):
                if getattr(chunk, "metrics", None) is not None:
                    server_metrics = plain(chunk.metrics)
                prompt_ids = list((chunk.model_extra or {}).get("prompt_token_ids") or prompt_ids)
                for choice in chunk.choices or ():
                    extra = choice.model_extra or {}
                    prompt_ids = list(extra.get("prompt_token_ids") or prompt_ids)
                    new = list(extra.get("token_ids") or ())
                    piece = choice_text(choice)
                    if new or piece:
                        received += max(len(new), 1)  # a server without token ids: a chunk per token
                    if received > budget:
                        problem = self._over_budget(budget)
                        break
                    if new or piece:
                        now = time.perf_counter()
                        first = now if first is None else first
                        last = now
                        text.append(piece)
                        token_ids.extend(new)
                        yield Delta(rid, piece, tuple(new))
                        live = client_metrics(prompt_ids, token_ids, started, first, last)
                        yield MetricsUpdate(rid, replace(live, kv_cache_usage=gauges.poll()))
                    if choice.finish_reason:
                        finish_reason = str(choice.finish_reason)
                if problem:
                    await self.abort(rid)  # the server learns to stop; not a user's cancel
                    self._cancelled.discard(rid)
                    break
        except ServerSilent as silent:
            await self.abort(rid)
            self._cancelled.discard(rid)
            problem = f"{silent} The reply so far is kept; the request was stopped."
        except Exception as error:  # the client raises many kinds; a closed stream is a cancel
            if rid not in self._cancelled:
                yield Failed(rid, self._failure(error, openai), _reason_kind(error, openai))
                return
        finally:
            self._streams.pop(rid, None)
            self.last_prompt_token_ids = tuple(prompt_ids)
            await gauges.stop()
        after = await gauges.read()
        metrics = final_metrics(prompt_ids, token_ids, started, first, last, server_metrics)
        metrics = with_server_gauges(metrics, before, after)
        if rid in self._cancelled:
            self._cancelled.discard(rid)
            yield Cancelled(rid, "".join(text), tuple(token_ids), metrics)
            return
        if not problem and not finish_reason:
            problem = (
                f"The server at {self.url} closed the reply after {received} tokens without "
                "finishing it (no finish reason, no [DONE]): the reply is incomplete."
            )
        if problem:
            yield Failed(rid, problem, "error")
            return
        yield Finished(rid, "".join(text), tuple(token_ids), metrics, finish_reason)

    def _over_budget(self, budget: int) -> str:
        return (
            f"The server at {self.url} kept sending past the reply budget ({budget} tokens): the reply "
            "was cut there and the request stopped."
        )

    def _failure(self, error: Exception, openai: Any) -> str:
        if isinstance(error, openai.APIStatusError):
            return f"The server at {self.url} refused the turn ({error.status_code}): {_api_reason(error)}"
        if isinstance(error, openai.APIConnectionError):
            return f"The server at {self.url} stopped answering ({error}). Your prompt is kept."
        return f"The turn on the server at {self.url} failed: {type(error).__name__}: {error}"

    async def abort(self, request_id: str) -> None:
        """Closing the stream is how a server learns to abort the request."""
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self._cancelled.add(request_id)
            await stream.close()

    async def shutdown(self) -> None:
        for rid in list(self._streams):
            await self.abort(rid)
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        self.info = None

    async def forget_cached_prompts(self) -> bool:
        """Empty the server's prefix cache (``/reset_prefix_cache``, offered in its development
        mode); False where it does not offer it."""
        import httpx

        if self._http is None:
            return False
        try:
            where = f"{self.url}/reset_prefix_cache"
            answer = await read_answer(self._http, "POST", where, total_s=self.deadlines.answer_s)
        except (httpx.HTTPError, AnswerRefused):
            return False
        return answer.status_code == 200

    async def server_prompt_token_ids(self, prompt: str) -> list[int] | None:
        """The server's own tokenization of a rendered prompt (``/tokenize``), or None."""
        if self._http is None:
            return None
        return await server_tokens(self._http, self.url, self.served_model, prompt)

    def _prompt_renderer(self) -> PromptRenderer:
        if self._renderer is None:
            raise EngineStartFailed("The server engine is not connected yet.")
        return self._renderer

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        return self._prompt_renderer().render(messages, tools, think=think)

    def decode(self, token_ids: list[int]) -> str:
        return str(self._prompt_renderer().tokenizer.decode(token_ids))

    def prompt_token_ids(self, prompt: str) -> list[int]:
        """Local tokenization of a rendered prompt (what the server must get too)."""
        return list(self._prompt_renderer().tokenizer(prompt, add_special_tokens=False)["input_ids"])


def _modalities(model_dir: Path) -> frozenset[str]:
    """What the served model takes, from its local config (text only where there is none here)."""
    from backend.engine.model.source import ModelSource

    if not (model_dir / "config.json").is_file():
        return frozenset({"text"})
    return ModelSource(model_dir, None, "").modalities()


def _reason_kind(error: Exception, openai: Any) -> Any:
    """A refused request leaves the server usable; a lost connection needs a new start."""
    if isinstance(error, openai.APIStatusError):
        return "rejected"
    return "engine_died" if isinstance(error, openai.APIConnectionError) else "error"


def _api_reason(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)[:300]
    return str(error)[:300]


def _http_reason(error: Exception) -> str:
    return str(error) or type(error).__name__
