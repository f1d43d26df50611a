"""Baseline and optimized paths on the real vLLM CPU engine: speculation, metrics, parity, cancel, crash."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from backend.compat.speculation import live_spec_metrics
from backend.config.settings import EngineSettings
from backend.engine.local.vllm import DEAD_MESSAGE, VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.parity import compare_tokens, run_parity
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import (
    Cancelled,
    Delta,
    EngineRequest,
    Failed,
    Finished,
    MetricsUpdate,
    SamplingSettings,
    TurnEvent,
)
from backend.errors import EngineDied
from backend.gemma4.messages import ChatMessage, PromptRenderer
from tests.support.engine_processes import engine_cores

pytestmark = pytest.mark.engine
GREEDY = SamplingSettings(max_tokens=32, ignore_eos=True)


def _request(engine: VllmEngine, rid: str, text: str, sampling: SamplingSettings = GREEDY) -> EngineRequest:
    prompt = PromptRenderer.for_model(str(engine.source.path)).render([ChatMessage("user", text)])
    return EngineRequest(request_id=rid, prompt=prompt.text, sampling=sampling)


async def _final(engine: VllmEngine, request: EngineRequest) -> TurnEvent:
    events = [event async for event in engine.stream(request)]
    return events[-1]


async def test_both_paths_stream_and_the_optimized_one_speculates(
    path_engines: tuple[VllmEngine, VllmEngine],
) -> None:
    baseline, optimized = path_engines
    assert "speculative_config" not in baseline.config.args
    spec = optimized.config.args["speculative_config"].value
    assert spec["model"] == str(optimized.source.drafter), "generated checkpoints use their MTP drafter"
    for engine in path_engines:
        final = await _final(engine, _request(engine, f"paths-{engine.config.path.name}", "Tell me a story."))
        assert isinstance(final, Finished), final
        m = final.metrics
        assert m.generated_tokens == len(final.token_ids) == 32
        assert m.ttft_s is not None and m.e2e_s is not None and m.ttft_s < m.e2e_s
        assert m.kv_cache_usage is not None and 0 <= m.kv_cache_usage <= 1
    final = await _final(optimized, _request(optimized, "spec", "Count: one two three four five six"))
    assert isinstance(final, Finished)
    assert final.metrics.drafted_tokens and final.metrics.drafted_tokens > 0
    assert final.metrics.accepted_tokens is not None and final.metrics.mean_acceptance_length is not None
    assert optimized.stats.drafted_tokens > 0


async def test_the_optimized_engine_streams_its_draft_counts_while_it_replies(
    path_engines: tuple[VllmEngine, VllmEngine],
) -> None:
    """The engine's own drafted/accepted counts reach the app with each streamed output (vLLM
    sends them only with the finished reply), growing as the reply does; the finished reply keeps
    its per-step record. The baseline streams none."""
    live: dict[str, list[tuple[int, int]]] = {}
    finals: dict[str, TurnEvent] = {}
    for engine in path_engines:
        name = engine.config.path.name
        live[name] = []
        request = _request(engine, f"live-{name}", "Count: one two three four five six seven eight")
        async for event in engine.stream(request):
            if isinstance(event, MetricsUpdate) and event.metrics.drafted_tokens:
                live[name].append((event.metrics.drafted_tokens, event.metrics.accepted_tokens or 0))
            finals[name] = event
    assert live["baseline"] == []
    counts = live["optimized"]
    assert len(counts) >= 2, "draft counts arrived before the reply ended"
    assert all(a <= d for d, a in counts) and counts == sorted(counts), counts
    final = finals["optimized"]
    assert isinstance(final, Finished) and final.metrics.drafted_tokens is not None
    assert final.metrics.drafted_tokens >= counts[-1][0] and final.metrics.draft_steps, "the whole record"
    optimized = path_engines[1]
    assert optimized.log_path is not None and live_spec_metrics.IN_USE in optimized.log_path.read_text()


async def test_parity_set_is_identical_between_paths_in_float32(
    path_engines: tuple[VllmEngine, VllmEngine],
) -> None:
    baseline, optimized = path_engines
    prompts = parity_prompts(baseline.source.modalities())
    assert len(prompts) >= 16
    renderer = PromptRenderer.for_model(str(baseline.source.path))
    requests = [p.request(renderer, GREEDY, tag="parity-") for p in prompts]
    report = await run_parity(baseline, optimized, requests, decode=lambda t: renderer.tokenizer.decode([t]))
    assert report.request_fraction == 1.0, report.summary() + str(
        [(rid, r.describe()) for rid, r in report.results if not r.identical]
    )
    assert report.position_fraction == 1.0


async def test_a_divergence_is_detected_and_described(eager_engine: VllmEngine) -> None:
    tokenizer = PromptRenderer.for_model(str(eager_engine.source.path)).tokenizer
    sampled = [replace(GREEDY, temperature=1.0, seed=seed) for seed in (1, 2)]
    finals = [
        await _final(eager_engine, _request(eager_engine, f"seed-{s.seed}", "Hello", s)) for s in sampled
    ]
    assert all(isinstance(f, Finished) for f in finals)
    a, b = (f.token_ids for f in finals if isinstance(f, Finished))
    verdict = compare_tokens(a, b, decode=lambda t: tokenizer.decode([t]))
    assert not verdict.identical and verdict.index is not None
    assert a[: verdict.index] == b[: verdict.index] and a[verdict.index] != b[verdict.index]
    assert verdict.describe().startswith(f"diverges at token {verdict.index}: ")


async def test_cancel_mid_stream_then_the_next_turn_works(eager_engine: VllmEngine) -> None:
    long = SamplingSettings(max_tokens=2000, ignore_eos=True)
    request = _request(eager_engine, "to-cancel", "Write a very long essay.", long)
    events: list[TurnEvent] = []
    async for event in eager_engine.stream(request):
        events.append(event)
        if sum(isinstance(e, Delta) for e in events) == 3:
            await eager_engine.abort(request.request_id)
    final = events[-1]
    assert isinstance(final, Cancelled), final
    assert 0 < len(final.token_ids) < 2000, "kept what was produced, stopped long before the budget"
    after = await _final(eager_engine, _request(eager_engine, "after-cancel", "Hello again"))
    assert isinstance(after, Finished) and after.metrics.generated_tokens == 32
    await asyncio.sleep(0.5)
    assert eager_engine.stats.running_requests == 0, "the aborted request holds no KV blocks"


async def test_killed_engine_is_reported_and_restarts(eager_engine: VllmEngine) -> None:
    victims = engine_cores(eager_engine)  # its own: the session's other engines run on
    assert victims, "the engine runs in child processes"
    for process in victims:  # stopped first, so the next call is sent before the core dies
        process.suspend()
    forgetting = asyncio.ensure_future(eager_engine.forget_cached_prompts())
    await asyncio.sleep(0.5)
    for process in victims:
        process.kill()
    with pytest.raises(EngineDied):  # vLLM itself would leave this call waiting forever
        await asyncio.wait_for(forgetting, timeout=30)
    final = await asyncio.wait_for(
        _final(eager_engine, _request(eager_engine, "after-kill", "Hi")), timeout=60
    )
    assert isinstance(final, Failed) and final.engine_died and final.message == DEAD_MESSAGE
    again = await asyncio.wait_for(_final(eager_engine, _request(eager_engine, "again", "Hi")), timeout=60)
    assert isinstance(again, Failed), "a dead engine keeps saying so, without hanging"
    await eager_engine.restart()
    restarted = await _final(eager_engine, _request(eager_engine, "restarted", "Hi"))
    assert isinstance(restarted, Finished) and restarted.metrics.generated_tokens == 32


def test_on_cpu_the_optimized_path_stops_drafting_above_four_running_requests(
    tiny_source: ModelSource,
) -> None:

    config = engine_config(EnginePath.optimized(), tiny_source, EngineSettings(speculation="mtp"))
    spec = config.args["speculative_config"]
    assert spec.value["num_speculative_tokens_per_batch_size"] == [[1, 4, 2], [5, 65536, 0]]
    assert "off above 4 running requests" in spec.reason
