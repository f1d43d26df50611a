"""Run the speculation probe: decode the same prompts on a plain, an MTP and an ngram engine, then choose.

See ``backend.engine.speculation.choice`` for how the choice is made from the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from backend.engine.model_source import ModelSource
from backend.engine.platform import on_gpu
from backend.engine.profiles import EngineProfile, engine_config
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.speculation.choice import (
    PROBE_DRAFTS,
    ProbeRun,
    SpeculationChoice,
    choice_key,
    choose,
    store_choice,
)
from backend.engine.vllm import VllmEngine
from backend.errors import GemmaChatError
from backend.messages import PromptRenderer
from backend.settings import EngineSettings

PROBE_PROMPTS = 6
PROBE_TOKENS = 64


def probe_profiles(source: ModelSource) -> list[EngineProfile]:
    """No speculation, the MTP drafter (when the model has one) and ngram, each drafting ``PROBE_DRAFTS``.

    All three are the optimized path but for speculation (its CPU linear kernel included), so the
    choice weighs drafts against the plain steps that path really takes."""
    profiles = [EngineProfile("optimized", "probe: none")]
    if source.drafter is not None:
        profiles.append(EngineProfile("optimized", "probe: MTP", "mtp", PROBE_DRAFTS))
    profiles.append(EngineProfile("optimized", "probe: ngram", "ngram", PROBE_DRAFTS))
    return profiles


async def measure_speculation(
    source: ModelSource, settings: EngineSettings, log_dir: Path, say: Callable[[str], None]
) -> SpeculationChoice:
    """Probe this model on this machine, store the choice for the optimized path, and return it."""
    renderer = PromptRenderer.for_model(str(source.path))
    sampling = SamplingSettings(max_tokens=PROBE_TOKENS, temperature=0.0, seed=0, ignore_eos=True)
    prompts = [p for p in parity_prompts(frozenset({"text"})) if not p.history][:PROBE_PROMPTS]
    requests = [p.request(renderer, sampling, tag="probe-") for p in prompts]
    runs: list[ProbeRun] = []
    for profile in probe_profiles(source):
        config = engine_config(profile, source, settings)
        spec = config.args.get("speculative_config")
        method = "none" if spec is None else ("ngram" if spec.value.get("method") == "ngram" else "mtp")
        if runs and method in {run.method for run in runs}:
            continue  # the MTP probe fell back to ngram (its drafter cannot run here)
        say(f"probing {method}" + ("" if method == "none" else f" with {PROBE_DRAFTS} drafts"))
        engine = VllmEngine(source, config, log_path=log_dir / f"probe-{method}.log")
        await engine.start()
        try:
            runs.append(await _probe(engine, method, requests))
        finally:
            await engine.shutdown()
    choice = choose(runs[0], runs[1:])
    store_choice(choice_key(source, settings, on_gpu()), choice)
    return choice


async def _probe(engine: VllmEngine, method: str, requests: list[EngineRequest]) -> ProbeRun:
    tokens, seconds = 0, 0.0
    histogram: list[int] = []
    warm_up = replace(requests[0], request_id=f"warm-up-{requests[0].request_id}")
    for index, request in enumerate([warm_up, *requests]):  # the first is a warm-up
        final = [event async for event in engine.stream(request)][-1]
        if not isinstance(final, Finished):
            detail = getattr(final, "message", type(final).__name__)
            raise GemmaChatError(
                f"The speculation probe's request failed on {method}: {detail}.", "See its log."
            )
        m = final.metrics
        if index == 0 or not m.decode_tokens_per_s:
            continue
        tokens += m.generated_tokens - 1
        seconds += (m.generated_tokens - 1) / m.decode_tokens_per_s
        for j, count in enumerate(m.acceptance_histogram or ()):
            histogram.extend([0] * (j + 1 - len(histogram)))
            histogram[j] += count
    spec = engine.config.args.get("speculative_config")
    drafts = 0 if spec is None else int(spec.value["num_speculative_tokens"])
    return ProbeRun(method, drafts, tokens / seconds if seconds else 0.0, tuple(histogram))
