"""Bench's throughput workload in the seed's sense (issue 66): on a GPU 256+ requests of 256
tokens, prompts that share no prefix-cache block, answered once at their end (vLLM's
``FINAL_ONLY``: no per-token streaming through the app), the figure from the engine's own
timestamps. The engine's side runs in tests/engine/paths/test_path_graphs.py (``bench --demo``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend.bench.options import (
    GPU_CONCURRENCY,
    BenchOptions,
    default_max_tokens,
    default_requests,
    with_levels,
)
from backend.bench.request_sets import prompt_sets
from backend.bench.workload_runs import RequestResult, WorkloadRun, run_throughput
from backend.bench.workloads import load_workloads
from backend.engine.local.sampling import sampling_params
from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource
from backend.engine.protocol import EngineRequest, Finished
from backend.gemma4.messages import PromptRenderer


def test_a_gpu_measures_the_steady_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("backend.engine.platform.on_gpu", lambda: True)
    assert default_requests() == GPU_CONCURRENCY and max(GPU_CONCURRENCY) >= 256
    assert default_max_tokens() == 256
    monkeypatch.setattr("backend.engine.platform.on_gpu", lambda: False)
    assert default_requests() == (8,) and default_max_tokens() == 32


def test_no_two_throughput_prompts_share_a_prefix_cache_block(tiny_source: ModelSource) -> None:
    """vLLM caches whole blocks of 16 tokens: every request's first block is its own."""
    options = BenchOptions(workloads=with_levels(("throughput",), (8, 256)), requests=8)
    sets = prompt_sets(load_workloads(), options)
    renderer = PromptRenderer.for_model(str(tiny_source.path))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_source.path))
    for name in ("throughput@256", "throughput"):
        firsts = set()
        for prompt in sets[name]:
            text = renderer.render(list(prompt.messages)).text
            firsts.add(tuple(tokenizer(text, add_special_tokens=False)["input_ids"][:16]))
        assert len(firsts) == len(sets[name]), name


def test_throughput_requests_are_answered_once_at_their_end() -> None:
    request = EngineRequest("r", "<bos>hi", final_only=True)
    from vllm.sampling_params import RequestOutputKind

    assert sampling_params(request).output_kind == RequestOutputKind.FINAL_ONLY
    assert sampling_params(EngineRequest("s", "<bos>hi")).output_kind == RequestOutputKind.DELTA

    class Seen:
        def __init__(self) -> None:
            self.requests: list[EngineRequest] = []

        def render(self, messages: Any) -> Any:
            from types import SimpleNamespace

            return SimpleNamespace(text="<bos>" + messages[0].text)

        async def stream(self, request: EngineRequest) -> Any:
            self.requests.append(request)
            yield Finished(request.request_id, "x", (1, 2), TurnMetrics(generated_tokens=2), "length")

    engine = Seen()
    sets = prompt_sets(load_workloads(), BenchOptions(requests=3))
    asyncio.run(run_throughput(engine, "baseline", sets["throughput"], 4, lambda: None))  # type: ignore[arg-type]
    assert len(engine.requests) == 3 and all(r.final_only for r in engine.requests)


def test_the_aggregate_is_over_the_engines_own_span() -> None:
    def done(span: tuple[float, float] | None) -> RequestResult:
        return RequestResult("p", (1,) * 100, TurnMetrics(generated_tokens=100, engine_span=span))

    engine = WorkloadRun("throughput", "b", (done((10.0, 11.0)), done((10.5, 12.0))), wall_s=4.0)
    assert engine.aggregate_tokens_per_s == pytest.approx(200 / 2.0), "first scheduled to last token"
    app = WorkloadRun("throughput", "b", (done((10.0, 11.0)), done(None)), wall_s=4.0)
    assert app.aggregate_tokens_per_s == pytest.approx(200 / 4.0), "a request without a span: wall time"
