"""Token parity on real weights with another CPU class's code path forced: as an AVX2 CPU computes,
and the row-by-row fallback of row-exact verification (no one-pass kernel).

The corpus test (``tests/engine/test_real_weights_parity.py``) runs on the class this machine has; here
``GEMMA_CHAT_FORCE_LINEAR=kernel`` makes both engines compute bfloat16 linears as an AVX2 CPU does
(PyTorch's fallback in the baseline, gemma-chat's kernel in the optimized path, whose every layer
passes the row check, so nothing is cut). Both engines run eagerly (no torch.compile): the same
kernels, and half the start, in a suite that must stay short. In its own file so that it runs in
the other lane of ``python3 -m tests`` beside the corpus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.compat.linear.row_exact_linear import FORCE_ENV as FORCE_ROW_EXACT_ENV
from backend.engine.paths.engine_args import EnginePath
from backend.engine.prompt_sets import SetPrompt, load_prompt_set
from backend.kernels.env import FORCE_ENV
from tests.engine.test_real_weights_parity import _engine, _speculative_differences, _tokens

pytestmark = [pytest.mark.engine, pytest.mark.second_lane, pytest.mark.timeout(1800)]


async def _forced_parity(folder: Path, home: Path, prompts: list[SetPrompt], label: str) -> None:
    """Both paths eagerly with the forced class in the environment: 64 greedy tokens each, compared."""
    baseline = await _engine(EnginePath.baseline(), folder, home, eager=True)
    try:
        reference = await _tokens(baseline, prompts, "ref-", 64)
    finally:
        await baseline.shutdown()
    differing, summary = await _speculative_differences(folder, home, prompts, reference, 64, eager=True)
    print(f"real-weights parity, {label}, {summary}")
    assert not differing, differing


async def test_forced_avx2_class_keeps_parity(
    real_weights: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an AVX2 CPU computes (PyTorch's bfloat16 fallback in the baseline, gemma-chat's kernel in
    the optimized path, whose every layer passes the row check): 8 prompts x 64 tokens, as PyTorch's
    AVX2 path is several times slower here."""
    monkeypatch.setenv(FORCE_ENV, "kernel")
    prompts = [p for p in load_prompt_set("real_parity_corpus.json") if p.kind == "chat"][:8]
    await _forced_parity(real_weights, gemma_home, prompts, "forced AVX2 class")


async def test_forced_row_by_row_fallback_keeps_parity(
    real_weights: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GEMMA_CHAT_FORCE_ROW_EXACT=rows``: no one-pass kernel, each verified row through vLLM's own
    matmul alone (what a layer the kernel cannot prove gets): 8 prompts x 64 tokens, eagerly."""
    monkeypatch.setenv(FORCE_ROW_EXACT_ENV, "rows")
    prompts = [p for p in load_prompt_set("real_parity_corpus.json") if p.kind == "chat"][8:16]
    await _forced_parity(real_weights, gemma_home, prompts, "row by row forced")
