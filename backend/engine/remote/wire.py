"""What a remote turn sends and reads over the OpenAI-compatible API: the request bodies for
``/v1/completions`` (and, for media, ``/v1/chat/completions`` with the joining template), the text
of a streamed chunk, and the turn's figures — measured here while streaming, the server's own
per-request timings where it sends them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import EngineRequest
from backend.engine.remote.media import JOIN_TEMPLATE


def completion_args(model: str, request: EngineRequest) -> dict[str, Any]:
    sampling = request.sampling
    body: dict[str, Any] = {
        "return_token_ids": True,
        "add_special_tokens": False,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "ignore_eos": sampling.ignore_eos,
    }
    if sampling.top_k:
        body["top_k"] = sampling.top_k
    return {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
        "extra_body": body,
    }


def chat_args(model: str, request: EngineRequest, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A media turn: the same sampling, the prompt as content parts joined by ``JOIN_TEMPLATE``."""
    args = completion_args(model, request)
    body = {**args.pop("extra_body"), "chat_template": JOIN_TEMPLATE, "add_generation_prompt": False}
    del args["prompt"]
    return {**args, "messages": [{"role": "user", "content": parts}], "extra_body": body}


def choice_text(choice: Any) -> str:
    """A completion choice's ``text``, or a chat choice's ``delta.content``."""
    text = getattr(choice, "text", None)
    if text is None:
        delta = getattr(choice, "delta", None)
        text = getattr(delta, "content", None) if delta is not None else None
    return text or ""


def client_metrics(
    prompt_ids: list[int], token_ids: list[int], started: float, first: float | None, last: float
) -> TurnMetrics:
    ttft = first - started if first is not None else None
    decode_s = last - first if first is not None and last > first else None
    rate = (len(token_ids) - 1) / decode_s if decode_s and len(token_ids) > 1 else None
    return TurnMetrics(
        prompt_tokens=len(prompt_ids),
        generated_tokens=len(token_ids),
        ttft_s=ttft,
        decode_tokens_per_s=rate,
        rolling_decode_tokens_per_s=rate,
        e2e_s=last - started if first is not None else None,
    )


def final_metrics(
    prompt_ids: list[int],
    token_ids: list[int],
    started: float,
    first: float | None,
    last: float,
    server: dict[str, Any] | None,
) -> TurnMetrics:
    """The server's own timings where it sent them, else the client's."""
    metrics = client_metrics(prompt_ids, token_ids, started, first, last)
    if not server:
        return metrics
    ttft_ms, generation_ms = server.get("time_to_first_token_ms"), server.get("generation_time_ms")
    spec = server.get("speculative_decoding") or {}
    decode = (len(token_ids) - 1) / (generation_ms / 1000) if generation_ms and len(token_ids) > 1 else None
    return replace(
        metrics,
        ttft_s=ttft_ms / 1000 if ttft_ms is not None else metrics.ttft_s,
        decode_tokens_per_s=decode or metrics.decode_tokens_per_s,
        e2e_s=(ttft_ms + generation_ms) / 1000
        if ttft_ms is not None and generation_ms is not None
        else metrics.e2e_s,
        mean_acceptance_length=spec.get("mean_acceptance_length"),
    )


def plain(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    return dict(dump()) if dump is not None else {}
