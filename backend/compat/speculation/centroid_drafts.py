"""Gemma 4 drafters with centroid-masked embeddings on a CPU.

``google/gemma-4-E2B-it-assistant`` scores its drafts sparsely (``use_ordered_embeddings``):
2048 centroids pick 32 clusters of its 262,144-token vocabulary and only their tokens are scored.
vLLM's Gemma 4 proposer captures CUDA graphs of that step when it loads such a drafter, which
fails on any other device (vLLM's CPU build stopped at start), so the optimized path ran on a CPU
without the drafter. Off CUDA, this skips the capture and drafts with the function those graphs
record (``get_top_tokens``: the same sparse argmax, run directly). Drafts never change a token:
the target verifies every one. Standard library only until vLLM's module is imported.
"""

from __future__ import annotations

from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once
from backend.compat.wrap import wrap

MODULE = "vllm.v1.spec_decode.gemma4"
_PATCHED = "_gemma_chat_centroid_drafts"
IN_USE = "gemma-chat centroid drafts: in use (sparse draft argmax run directly, no CUDA graphs off CUDA)"


def _sparse_drafter(proposer: Any) -> bool:
    return getattr(getattr(proposer, "model", None), "masked_embedding", None) is not None


def _no_capture_off_cuda(capture: Any) -> Any:
    def _setup_centroids_cuda_graphs(self: Any) -> None:
        if getattr(self.device, "type", "cuda") == "cuda":
            capture(self)
        else:
            log_once(IN_USE)

    return _setup_centroids_cuda_graphs


def _sparse_greedy(greedy: Any) -> Any:
    def _greedy_sample(self: Any, hidden_states: Any) -> Any:
        if not self._centroids_sizes and _sparse_drafter(self):
            return self.model.get_top_tokens(hidden_states)
        return greedy(self, hidden_states)

    return _greedy_sample


def patch(module: Any) -> None:
    """Optional: a vLLM without the centroid drafter's methods gets a line in its log, no patch."""
    targets = {
        "Gemma4Proposer._setup_centroids_cuda_graphs": _no_capture_off_cuda,
        "Gemma4Proposer._greedy_sample": _sparse_greedy,
    }
    wrap(module, targets, mark=_PATCHED, label="centroid drafts", optional=True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
