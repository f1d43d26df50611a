"""Exact verification at E2B's shapes: with drafts accepted, the optimized path's greedy tokens are
the baseline's on a checkpoint with every layer type and matmul shape of Gemma 4 E2B.

``make-model --size e2b-layers`` keeps E2B's widths (hidden 1,536, MLP 6,144 and double-wide on
KV-sharing layers, heads of 256 and 512, per-layer inputs of 256, KV sharing of both layer kinds)
in 6 layers with a 16k vocabulary. Its random weights give near-flat logits, so one different bit
in a verifying step changes a token: the strictest oracle there is. ngram speculation drafts from
the reply's own repeats (random weights repeat), so verifying steps carry drafts and accept some.
Each prompt runs alone on each path, as a user's turn does, with the shipped configuration
(row-exact verification, and the one-pass kernel where this CPU has AVX512-BF16).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from backend.checkpoints.sizes import e2b_layers
from backend.checkpoints.writer import make_checkpoint
from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import resolve
from backend.engine.parity import compare_tokens
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.messages import ChatMessage

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

TOKENS = 128
PROMPTS = (
    "Write a story about a lighthouse keeper.",
    "def merge_sorted(a, b):",
    "List the planets of the solar system, one per line, with a fact about each.",
)
SETTINGS = EngineSettings(
    dtype="bfloat16", max_model_len=1024, kv_cache_gib=0.5, speculation="ngram", draft_tokens=3
)


LINEAR_LAYERS = 79
"""Every linear layer the optimized engine loads for this checkpoint: 38 in the text model (per layer
q(kv), o, gate_up, down and the two per-layer input layers — a ``ReplicatedLinear`` gate and
projection — then the per-layer model projection and the logits) and 41 in its vision and audio
towers. Each must be checked: the 6 gates and 6 projections went unchecked before (67 of 79), and
an unchecked gate changed a verifying step's bits at E2B's size."""
SUMMARY = re.compile(r"row-exact linears: in use \((\d+) of (\d+) linear layers row-variant(.*)\)")


async def _run(path: EnginePath, folder: Path, home: Path) -> list[Finished]:
    source = resolve(str(folder))
    config = engine_config(path, source, SETTINGS)
    if "speculative_config" in config.args:  # drafts at every load (a CPU stops drafting above 4)
        spec = dict(config.args["speculative_config"].value)
        spec["num_speculative_tokens_per_batch_size"] = [[1, 1 << 16, spec["num_speculative_tokens"]]]
        config = replace(config, args={**config.args, "speculative_config": Argument(spec, "tests")})
    log = home / "logs" / f"e2b-layers-{path.name}.log"
    engine = VllmEngine(source, config, log_path=log)
    with capture_stderr(log):
        await engine.start()
    finals = []
    try:
        for i, text in enumerate(PROMPTS):
            request = EngineRequest(
                f"{path.name}-{i}",
                engine.render([ChatMessage("user", text)]).text,
                sampling=SamplingSettings(max_tokens=TOKENS, ignore_eos=True),
            )
            last = None
            async for event in engine.stream(request):
                last = event
            assert isinstance(last, Finished), last
            finals.append(last)
    finally:
        await engine.shutdown()
    return finals


async def test_e2b_layer_types_keep_the_baselines_tokens_with_drafts_accepted(
    tmp_path_factory: pytest.TempPathFactory, gemma_home: Path
) -> None:
    folder = make_checkpoint(tmp_path_factory.mktemp("e2b-layers"), e2b_layers(), seed=0).model
    baseline = await _run(EnginePath.baseline(), folder, gemma_home)
    optimized = await _run(EnginePath.optimized(), folder, gemma_home)
    accepted = sum(f.metrics.accepted_tokens or 0 for f in optimized)
    assert accepted > 0, "no draft was accepted: the verifying steps compared nothing"
    results = [compare_tokens(b.token_ids, o.token_ids) for b, o in zip(baseline, optimized, strict=True)]
    found = SUMMARY.findall((gemma_home / "logs" / "e2b-layers-optimized.log").read_text(errors="replace"))
    assert found, "the optimized engine's log has no row-exact summary"
    _variant, checked, rest = found[-1]
    assert int(checked) == LINEAR_LAYERS, f"{checked} of {LINEAR_LAYERS} linear layers checked"
    assert "no proof" not in rest, rest
    from backend.compat.linear.row_exact_record import kept

    verdict = kept(str(folder))  # what `gemma-chat paths` shows for this model before a start
    assert verdict is not None and verdict["checked"] == LINEAR_LAYERS and verdict["unproven"] == []
    same = sum(r.identical for r in results)
    print(f"e2b-layers parity: {same}/{len(results)} identical, {accepted} drafts accepted")
    assert all(len(b.token_ids) == TOKENS for b in baseline)
    assert all(r.identical for r in results), [r.describe() for r in results]
