"""Token parity on real weights: the optimized path, speculating, gives the baseline's greedy tokens.

Random weights have decisive or flat logits; real weights (Gemma 3 270M in bfloat16, built once from
the package index by ``backend.checkpoints.real_weights``) have near-ties, where one different bit
of a verifying step's product changes a token. The corpus (``assets/real_parity_corpus.json``: 51
prompts — chat, code, prose, six other languages, multi-turn, a system prompt, contexts past the
512-token sliding window) is decoded for 256 greedy tokens on both paths.

Run one request at a time, the baseline would take about 9 minutes here; the corpus runs all at
once instead, on a reference baseline whose steps of several requests compute each request's rows
as that request would alone (``GEMMA_CHAT_ROW_EXACT=all``; a step of one request is untouched, so
solo requests are stock vLLM's — checked below on three prompts), and on the optimized path with
ngram speculation and the same cut. Each request's tokens then equal what it gets alone, on each
path, and the test compares the optimized path's verifying steps with the baseline's plain steps
at scale. Without row-exact verification (``GEMMA_CHAT_FORCE_ROW_EXACT=off``) tokens diverge here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from backend.compat.linear.row_exact_linear import ENV as ROW_EXACT_ENV
from backend.config.settings import EngineSettings
from backend.config.switch_rules import ROW_EXACT_KERNEL
from backend.engine.argument import Argument
from backend.engine.cpu.env import row_exact_env
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import resolve
from backend.engine.parity import ParityReport, compare_tokens
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.prompt_sets import SetPrompt, load_prompt_set
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings

pytestmark = [pytest.mark.engine, pytest.mark.second_lane, pytest.mark.timeout(1800)]

TOKENS = 256
SETTINGS = EngineSettings(dtype="bfloat16", max_model_len=2048, kv_cache_gib=1, speculation="ngram")
SOLO = ("p00", "long-context", "multi-turn-code")
"""Prompts also run alone on the reference: the cut must not change a solo request's tokens."""


async def _engine(path: EnginePath, folder: Path, home: Path, eager: bool = False) -> VllmEngine:
    """``eager``: both engines without torch.compile (a forced class's run: half the start)."""
    source = resolve(str(folder))
    config = engine_config(path, source, SETTINGS)
    args = dict(config.args)
    if eager:
        args["enforce_eager"] = Argument(True, "tests: no compile (the same kernels, eagerly, on both paths)")
    if "speculative_config" in args:  # drafts at every load (a CPU stops drafting above 4 requests)
        spec = dict(args["speculative_config"].value)
        spec["num_speculative_tokens_per_batch_size"] = [[1, 1 << 16, spec["num_speculative_tokens"]]]
        args["speculative_config"] = Argument(spec, "tests: drafts at every load")
    env = {**config.env, ROW_EXACT_ENV: Argument("all", "tests: batch as if alone")}
    if path.name == "optimized" and not row_exact_env():  # GEMMA_CHAT_FORCE_ROW_EXACT=off: must fail
        env = {**env, ROW_EXACT_ENV: Argument("off", "forced off: verify as 673d4af did")}
    config = replace(config, args=args, env=env)
    log = home / "logs" / f"real-{path.name}.log"
    engine = VllmEngine(source, config, log_path=log)
    with capture_stderr(log):
        await engine.start()
    return engine


async def _finished(
    engine: VllmEngine, prompts: Sequence[SetPrompt], tag: str, tokens: int = TOKENS
) -> dict[str, Finished]:
    sampling = SamplingSettings(max_tokens=tokens, ignore_eos=True)
    renderer = engine._prompt_renderer()

    async def one(prompt: SetPrompt) -> Finished:
        last = None
        request: EngineRequest = prompt.request(renderer, sampling, tag)
        async for event in engine.stream(request):
            last = event
        assert isinstance(last, Finished), last
        return last

    finished = await asyncio.gather(*(one(p) for p in prompts))
    return {p.id: f for p, f in zip(prompts, finished, strict=True)}


async def _tokens(
    engine: VllmEngine, prompts: Sequence[SetPrompt], tag: str, tokens: int = TOKENS
) -> dict[str, tuple[int, ...]]:
    return {name: f.token_ids for name, f in (await _finished(engine, prompts, tag, tokens)).items()}


async def _speculative_differences(
    folder: Path,
    home: Path,
    prompts: Sequence[SetPrompt],
    reference: dict[str, tuple[int, ...]],
    tokens: int,
    eager: bool = False,
) -> tuple[list[str], str]:
    """Run ``prompts`` at once on the optimized path (drafting at every load) and compare."""
    shipped = engine_config(EnginePath.optimized(), resolve(str(folder)), SETTINGS)
    if row_exact_env():  # the optimized path verifies row-exactly whenever it drafts
        one_pass = ROW_EXACT_KERNEL in shipped.env  # with it, every step computes rows as alone
        assert shipped.env[ROW_EXACT_ENV].value == ("all" if one_pass else 1)
    optimized = await _engine(EnginePath.optimized(), folder, home, eager)
    try:
        finished = await _finished(optimized, prompts, "opt-", tokens)
    finally:
        await optimized.shutdown()
    accepted = sum(f.metrics.accepted_tokens or 0 for f in finished.values())
    assert accepted > 0  # the verifying steps compared here carried drafts
    report = ParityReport(
        tuple((p.id, compare_tokens(reference[p.id], finished[p.id].token_ids)) for p in prompts)
    )
    summary = f"{len(prompts)} prompts x {tokens} tokens: {report.summary()}; {accepted} drafts accepted"
    return [
        f"{name}: {result.describe()}" for name, result in report.results if not result.identical
    ], summary


async def test_corpus_identical_with_speculation(real_weights: Path, gemma_home: Path) -> None:
    corpus = load_prompt_set("real_parity_corpus.json")
    assert len(corpus) >= 50
    baseline = await _engine(EnginePath.baseline(), real_weights, gemma_home)
    try:
        long_prompt = next(p for p in corpus if p.id == "long-context")
        assert baseline.render(long_prompt.messages()).token_count > 512  # past the sliding window
        solo: dict[str, tuple[int, ...]] = {}
        for prompt in (p for p in corpus if p.id in SOLO):
            solo |= await _tokens(baseline, [prompt], "solo-")
        reference = await _tokens(baseline, corpus, "ref-")
    finally:
        await baseline.shutdown()
    for name, tokens in solo.items():
        assert compare_tokens(tokens, reference[name]).identical, name
    differing, summary = await _speculative_differences(real_weights, gemma_home, corpus, reference, TOKENS)
    print(f"real-weights parity, {summary}")
    assert not differing, differing
