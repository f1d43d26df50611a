"""Drafters with centroid-masked embeddings draft off CUDA: no graph capture, the same sparse argmax.

The real engine's side: a generated drafter with centroids drafting in vLLM's CPU build, the
baseline's tokens (below, through tests/support/centroid_engines.py in a fresh interpreter).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from backend.checkpoints import make_checkpoint
from backend.compat.speculation import centroid_drafts


def _proposer_module() -> types.ModuleType:
    class Gemma4Proposer:
        def __init__(self, device: str, sparse: bool) -> None:
            self.device = types.SimpleNamespace(type=device)
            self._centroids_sizes: list[int] = []
            self.captured = 0
            self.model = types.SimpleNamespace(
                masked_embedding=object() if sparse else None,
                get_top_tokens=lambda hidden: ("sparse", hidden),
            )

        def _setup_centroids_cuda_graphs(self) -> None:
            self.captured += 1
            self._centroids_sizes = [1, 2]

        def _greedy_sample(self, hidden: Any) -> Any:
            return ("graphs" if self._centroids_sizes else "full", hidden)

    module = types.ModuleType("gemma4")
    module.Gemma4Proposer = Gemma4Proposer  # type: ignore[attr-defined]
    return module


def test_off_cuda_the_capture_is_skipped_and_drafts_take_the_sparse_argmax() -> None:
    module = _proposer_module()
    centroid_drafts.patch(module)
    cpu = module.Gemma4Proposer("cpu", sparse=True)
    cpu._setup_centroids_cuda_graphs()
    assert cpu.captured == 0
    assert cpu._greedy_sample("h") == ("sparse", "h")
    plain = module.Gemma4Proposer("cpu", sparse=False)
    assert plain._greedy_sample("h") == ("full", "h"), "a drafter without centroids: vLLM's own path"
    cuda = module.Gemma4Proposer("cuda", sparse=True)
    cuda._setup_centroids_cuda_graphs()
    assert cuda.captured == 1 and cuda._greedy_sample("h") == ("graphs", "h"), "CUDA keeps its graphs"
    centroid_drafts.patch(module)  # idempotent: wrapped once
    assert not hasattr(module.Gemma4Proposer._greedy_sample.__wrapped__, "__wrapped__")


def test_vllm_still_captures_and_replays_the_way_the_patch_assumes() -> None:
    """The contract, read from the installed vLLM (patched on import, as in every interpreter of this
    environment): loading a drafter with centroids calls the capture, the graphs record
    ``get_top_tokens``, and an empty size list means no graphs."""
    import vllm.v1.spec_decode.gemma4 as module

    assert getattr(module, centroid_drafts._PATCHED, False), "the import hook patched it"
    proposer = module.Gemma4Proposer
    load = inspect.getsource(proposer.load_model)
    assert 'if getattr(self.model, "masked_embedding", None) is not None:' in load
    assert "self._setup_centroids_cuda_graphs()" in load
    capture = inspect.getsource(proposer._setup_centroids_cuda_graphs.__wrapped__)
    assert "masked_emb.get_top_tokens(" in capture and "torch.cuda.CUDAGraph()" in capture
    assert "if self._centroids_sizes:" in inspect.getsource(proposer._greedy_sample.__wrapped__)


@pytest.mark.engine
def test_a_centroid_masked_drafter_drafts_in_vllms_cpu_build_and_changes_no_token(tmp_path: Path) -> None:
    """The released E2B assistant's kind of drafter, generated (64 centroids): vLLM's CPU build
    stopped at start loading it. In a fresh interpreter, as the app starts engines: the optimized
    path drafts with it, and every token is the baseline's."""
    checkpoint = make_checkpoint(tmp_path / "checkpoint", "tiny", seed=0, centroids=64)
    env = {**os.environ, "GEMMA_CHAT_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "tests.support.centroid_engines", str(checkpoint.model), str(tmp_path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    baseline, optimized = found["baseline"], found["optimized"]
    assert optimized["speculative"] and not baseline["speculative"]
    assert optimized["patched"], "the drafter was loaded through the patch"
    assert optimized["drafted"] > 0, "the drafter drafted"
    assert optimized["tokens"] == baseline["tokens"]
