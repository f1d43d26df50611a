"""The optimized CPU path's first start answers at once and decides its speculation on the real
engine when idle (the demo model).

Beside the second lane's speculation probe (tests/engine/speculation/test_speculation.py), so the
two lanes stay even.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from backend.config.settings import EngineSettings
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.metrics import accepted_positions
from backend.engine.model.source import demo_model
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.probe.by_load import load_requests, measure_by_load
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.speculation import first_start, when_idle
from backend.engine.speculation.choice import MIN_PAIRED
from backend.engine.speculation.kept import CHOICES_ENV, stored_choice
from backend.gemma4.messages import ChatMessage, PromptRenderer


@pytest.mark.engine
async def test_the_first_start_answers_then_decides_when_idle_and_a_warm_start_applies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's optimized path with nothing kept, as the app starts it (``when_idle``): ready
    without measuring, it answers the first prompt at once and without drafts; then, idle, it
    measures 0-4 drafts on the engine itself (each count really drafts, every count keeps the
    tokens), keeps the choice and answers with it — the same tokens as without drafts; the next
    start measures nothing."""
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))  # nothing kept for this model here
    monkeypatch.delenv(CHOICES_ENV)  # not the run's shared file: this start must measure
    # The suite's other lane starts engines beside this one: the figures' own soundness check
    # (a busy machine keeps nothing; tests/engine/speculation/test_first_start_drafts.py) may then
    # judge them busy.
    # Keeping and applying is what is under test here.
    monkeypatch.setattr(first_start, "unsound_measurement", lambda *_: None)
    source = demo_model()
    config = engine_config(EnginePath.optimized(), source, EngineSettings())
    assert config.drafts is not None
    log = tmp_path / "optimized.log"
    said: list[str] = []
    engine = VllmEngine(source, config, log_path=log, measure=when_idle.WHEN_IDLE)
    renderer = PromptRenderer.for_model(str(source.path))
    text = renderer.render([ChatMessage("user", "Write a function that adds two numbers.")]).text
    sampling = SamplingSettings(max_tokens=48, temperature=0.0, ignore_eos=True)
    try:
        with capture_stderr(log):
            started = await engine.start(said.append)
            assert not any("measuring" in line for line in said), said
            assert started.speculation == when_idle.PENDING and engine.later is not None
            first = await _final(engine, EngineRequest("first", text, sampling=sampling))
            assert not first.metrics.drafted_tokens, "the first answer: no drafts"
            assert engine.later.requests == 0 and stored_choice(config.drafts.key) is None, (
                "answered before any measurement"
            )
            info = await asyncio.wait_for(engine.measured_info(), 600)
        assert info is not None and engine.later.requests > 0
        choice = stored_choice(config.drafts.key)
        assert choice is not None and choice.measured_by == "first start", info.speculation
        assert info.speculation == choice.verdict()
        assert [run.drafts for run in choice.runs] == [0, 1, 2, 3, 4]
        for run in choice.runs:
            assert len(run.rates) >= MIN_PAIRED and not run.diverged, run.describe()
            assert (sum(run.histogram) > 0) == (run.drafts > 0), "drafted steps are the engine's own count"
        chosen = await _final(engine, EngineRequest("chosen", text, sampling=sampling))
        assert chosen.token_ids == first.token_ids, "the measured choice keeps the first answer's tokens"
        await engine.set_drafts(0, config.drafts.up_to)
        plain = await _final(engine, EngineRequest("plain", text, sampling=sampling))
        assert chosen.token_ids == plain.token_ids, "drafts never change a token"
        assert bool(chosen.metrics.drafted_tokens) == (choice.method != "none")
        assert not plain.metrics.drafted_tokens
        if choice.method != "none":  # the accepted-draft view reads the engine's steps
            m = chosen.metrics
            assert m.draft_steps is not None and sum(a for _, a in m.draft_steps) == m.accepted_tokens
            assert all(1 <= drafted <= choice.drafts for drafted, _ in m.draft_steps), m.draft_steps
            assert m.step_tokens is not None, "one placement of the steps fits the engine's outputs"
            assert sum(size for size, _ in m.step_tokens) == len(chosen.token_ids)
            shown = len(accepted_positions(m.step_tokens))
            assert m.accepted_tokens is not None
            assert m.accepted_tokens - choice.drafts <= shown <= m.accepted_tokens, (
                "less only drafts past the end"
            )
        await _drafts_by_load(engine, renderer, max(choice.drafts, 2))
    finally:
        await engine.shutdown()
    said.clear()
    again = VllmEngine(
        source,
        engine_config(EnginePath.optimized(), source, EngineSettings()),
        log_path=log,
        measure=when_idle.WHEN_IDLE,
    )
    try:
        with capture_stderr(log):
            warm = await again.start(said.append)
        assert not any("measuring" in line for line in said), "a warm start measures nothing"
        assert again.later is None and warm.speculation == info.speculation
    finally:
        await again.shutdown()


async def _drafts_by_load(engine: VllmEngine, renderer: PromptRenderer, drafts: int) -> None:
    """``paths --measure``'s last stage on the real engine: 1 and 3 requests at once, each
    count of drafts in turn, the same tokens; then a schedule of two steps set on the engine core
    (none at 1 running request, 1 draft at 2-3) drafts exactly so."""
    said: list[str] = []
    levels = await measure_by_load(engine, drafts, (1, 3), renderer, said.append, rounds=1, tokens=16)
    for level in levels:
        assert sorted(level.rates) == [0, 1, drafts] and all(level.rate(d) > 0 for d in level.rates)
        assert not any(level.diverged(d) for d in level.rates), level.describe()
    await engine.set_drafts(0, 1, ((3, 1),))
    asked = load_requests(renderer, 3, "steps-")
    finals = await asyncio.gather(*(_final(engine, request) for request in asked))
    drafted = [n for final in finals for n, _ in final.metrics.draft_steps or ()]
    assert drafted and set(drafted) == {1}, drafted
    await engine.set_drafts(0, 4)


async def _final(engine: VllmEngine, request: EngineRequest) -> Finished:
    final = [event async for event in engine.stream(request)][-1]
    assert isinstance(final, Finished), final
    return final
