"""What a vLLM server says about itself beside the completions API: its Prometheus ``/metrics``
(KV-cache use, requests running, speculative-decoding counters), ``/tokenize`` (how it tokenizes a
prompt) and, where it runs in development mode (``VLLM_SERVER_DEV_MODE=1``), ``/server_info``
(its parallel layout). Every reader returns ``None`` (or nothing) when the server does not answer
or answers something that is not the expected JSON: the figures are extras, never a reason to
fail a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from backend.engine.remote.answers import AnswerRefused, read_answer

if TYPE_CHECKING:
    from backend.engine.metrics import TurnMetrics

SAMPLE = re.compile(r"^(vllm:[a-z_]+)(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN|[+-]Inf)$")
METRICS_TIMEOUT_S = 2.0
POLL_INTERVAL_S = 1.0
PARALLEL_KEYS = {
    "tensor_parallel_size": "TP",
    "pipeline_parallel_size": "PP",
    "data_parallel_size": "DP",
}


@dataclass(frozen=True)
class ServerGauges:
    """One reading of ``/metrics`` (summed over engines and label sets)."""

    kv_cache_usage: float | None = None
    """0-1, as vLLM reports ``vllm:kv_cache_usage_perc``."""
    requests_running: float | None = None
    drafted_tokens: float | None = None
    """``vllm:spec_decode_num_draft_tokens_total`` (a counter since the server started)."""
    accepted_tokens: float | None = None


def unanswered() -> tuple[type[Exception], ...]:
    """What an optional endpoint's failure to answer raises (httpx imported only when asked)."""
    import httpx

    return (httpx.HTTPError, AnswerRefused)


def parse_metrics(text: str) -> ServerGauges:
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line.strip())
        if match:
            name, value = match.groups()
            values[name] = values.get(name, 0.0) + float(value)
    kv = values.get("vllm:kv_cache_usage_perc")
    return ServerGauges(
        kv_cache_usage=kv if kv is None else min(kv, 1.0),
        requests_running=values.get("vllm:num_requests_running"),
        drafted_tokens=values.get("vllm:spec_decode_num_draft_tokens_total"),
        accepted_tokens=values.get("vllm:spec_decode_num_accepted_tokens_total"),
    )


async def read_gauges(http: Any, url: str) -> ServerGauges | None:
    """``/metrics`` now, or None if the server does not answer it."""
    try:
        answer = await read_answer(http, "GET", f"{url}/metrics", total_s=METRICS_TIMEOUT_S)
    except unanswered():
        return None
    return parse_metrics(answer.text) if answer.status_code == 200 else None


class GaugePoller:
    """``/metrics`` for one streaming turn: read at its start and end, and polled in the background
    at most once per ``POLL_INTERVAL_S`` while it streams (the stream never waits on it)."""

    def __init__(self, http: Any, url: str) -> None:
        self.http, self.url = http, url
        self.latest: ServerGauges | None = None
        self._task: asyncio.Task[None] | None = None
        self._polled = time.monotonic()

    async def read(self) -> ServerGauges | None:
        if self.http is None:
            return None
        self.latest = await read_gauges(self.http, self.url) or self.latest
        return self.latest

    def poll(self) -> float | None:
        """The latest KV-cache use; starts a new reading when the last one is old enough."""
        now = time.monotonic()
        if self.http is not None and now - self._polled >= POLL_INTERVAL_S and self._task is None:
            self._polled = now
            self._task = asyncio.get_running_loop().create_task(self._refresh())
        return self.latest.kv_cache_usage if self.latest else None

    async def _refresh(self) -> None:
        try:
            await self.read()
        finally:
            self._task = None

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def with_server_gauges(
    metrics: TurnMetrics, before: ServerGauges | None, after: ServerGauges | None
) -> TurnMetrics:
    """A finished turn's figures with the server's KV use and, where its own per-request figures
    gave none, the acceptance its counters moved by during the turn."""
    kv = after.kv_cache_usage if after and after.kv_cache_usage is not None else metrics.kv_cache_usage
    metrics = replace(metrics, kv_cache_usage=kv)
    moved = acceptance_between(before, after)
    if moved is None or metrics.drafted_tokens is not None:
        return metrics
    drafted, accepted = moved
    return replace(metrics, drafted_tokens=drafted, accepted_tokens=accepted)


def acceptance_between(before: ServerGauges | None, after: ServerGauges | None) -> tuple[int, int] | None:
    """(drafted, accepted) tokens between two readings; None without speculation or a reading."""
    if before is None or after is None or after.drafted_tokens is None or before.drafted_tokens is None:
        return None
    drafted = after.drafted_tokens - before.drafted_tokens
    accepted = (after.accepted_tokens or 0.0) - (before.accepted_tokens or 0.0)
    return (int(drafted), int(accepted)) if drafted > 0 else None


async def server_tokens(http: Any, url: str, model: str, prompt: str) -> list[int] | None:
    """The server's tokenization of a rendered prompt (no special tokens added), or None."""
    body = {"model": model, "prompt": prompt, "add_special_tokens": False}
    try:
        answer = await read_answer(http, "POST", f"{url}/tokenize", json=body, total_s=METRICS_TIMEOUT_S * 5)
    except unanswered():
        return None
    body = _json(answer)
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        return None
    return list(tokens)


async def server_parallel(http: Any, url: str) -> dict[str, int]:
    """``{"tensor_parallel_size": 2, ...}`` from ``/server_info`` where the server offers it."""
    try:
        where = f"{url}/server_info"
        answer = await read_answer(
            http, "GET", where, params={"config_format": "json"}, total_s=METRICS_TIMEOUT_S * 5
        )
    except unanswered():
        return {}
    body = _json(answer)
    config = (body.get("vllm_config") or {}) if isinstance(body, dict) else {}
    parallel = config.get("parallel_config") if isinstance(config, dict) else None
    if not isinstance(parallel, dict):
        return {}
    return {key: int(parallel[key]) for key in PARALLEL_KEYS if isinstance(parallel.get(key), int)}


def parallel_label(engine_args: dict[str, Any]) -> str:
    """``TP 2 · PP 2`` for the sizes above 1 a server reported (``TP 1`` where it reported only 1s)."""
    sizes = {key: engine_args[key] for key in PARALLEL_KEYS if isinstance(engine_args.get(key), int)}
    if not sizes:
        return ""
    shown = [f"{PARALLEL_KEYS[key]} {size}" for key, size in sizes.items() if size > 1]
    return " · ".join(shown) or "TP 1"


def remote_label(engine_args: dict[str, Any]) -> str:
    """``remote: gpu-box:8000 · TP 2`` for a server's engine (``""`` for one in process)."""
    where = str(engine_args.get("server") or "")
    if not where:
        return ""
    layout = parallel_label(engine_args)
    return f"remote: {where.split('://')[-1]}" + (f" · {layout}" if layout else "")


def _json(answer: Any) -> Any:
    """An optional endpoint's JSON body, or None (not 200, or not JSON: an extra, never a failure)."""
    if answer.status_code != 200:
        return None
    try:
        return answer.json()
    except ValueError:
        return None
