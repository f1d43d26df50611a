"""vLLM's Triton attention kernel run by Triton's interpreter on the CPU, to check what exact mode
can promise: is a verifying step's output for a token bitwise the plain step's?

Run in a fresh interpreter (``python tests/support/triton_interpreted.py``): ``TRITON_INTERPRET=1`` must be
set before Triton's kernels are defined, and vLLM must judge Triton usable (on the CPU build it
disables Triton unless its version reads as the CUDA build's and a driver is active; an empty
``CUDA_VISIBLE_DEVICES`` is the lenient case ``vllm.triton_utils.importing`` allows). Each case
puts a token at position ``p`` alone in a step (a plain decode step) and second in a step of two
queries from the same request (a verifying step), with the same KV cache, and compares the two
outputs for ``p`` bit for bit. E2B's attention: 8 query heads on 1 KV head, bfloat16 replaced by
float32 (the interpreter's NumPy has no bfloat16; the masking and the online softmax are the
kernel's own). Prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

HEADS, KV_HEADS, WINDOW, BLOCK = 8, 1, 512, 16


def _attend(kernels: Any, q: Any, cache: tuple[Any, Any], seq_len: int, window: tuple[int, int]) -> Any:
    import torch

    keys, values = cache
    out = torch.empty_like(q)
    kernels.unified_attention(
        q=q,
        k=keys,
        v=values,
        out=out,
        cu_seqlens_q=torch.tensor([0, q.shape[0]], dtype=torch.int32),
        max_seqlen_q=q.shape[0],
        seqused_k=torch.tensor([seq_len], dtype=torch.int32),
        max_seqlen_k=seq_len,
        softmax_scale=1.0,  # Gemma 4: q and k are RMS-normed, scaling 1
        causal=True,
        window_size=window,
        block_table=torch.arange(keys.shape[0], dtype=torch.int32)[None, :],
        softcap=0,
        q_descale=None,
        k_descale=None,
        v_descale=None,
    )
    return out


def same_as_plain(kernels: Any, p: int, head: int, sliding: bool, negative: bool) -> bool:
    """Whether token ``p``'s output, second of two queries in a step, equals its output alone.
    ``negative``: every key scores below zero for head 0 of that token (keys pointed away from
    its query), so the online softmax's running maximum stays negative."""
    import torch

    generator = torch.Generator().manual_seed(0)
    blocks = p // BLOCK + 2
    keys = torch.randn(blocks * BLOCK, KV_HEADS, head, generator=generator)
    values = torch.randn(blocks * BLOCK, KV_HEADS, head, generator=generator)
    queries = torch.randn(2, HEADS, head, generator=generator)
    if negative:
        keys = keys - 4 * queries[1, 0] / queries[1, 0].norm()
    cache = (keys.view(blocks, BLOCK, KV_HEADS, head), values.view(blocks, BLOCK, KV_HEADS, head))
    q = queries / head**0.5
    window = (WINDOW - 1, 0) if sliding else (-1, -1)
    alone = _attend(kernels, q[1:].contiguous(), cache, p + 1, window)
    verifying = _attend(kernels, q, cache, p + 1, window)
    return bool(torch.equal(alone[0], verifying[1]))


def cases() -> dict[str, bool]:
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["VLLM_BATCH_INVARIANT"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import vllm.platforms as platforms

    platforms.vllm_version_matches_substr = lambda substr: False  # read as the CUDA build
    from vllm.triton_utils import HAS_TRITON

    assert HAS_TRITON, "vLLM did not take Triton"
    from vllm.v1.attention.ops import triton_unified_attention as kernels

    assert kernels.is_batch_invariant
    out = {
        # 543 - 511 = 32: the window of token 543 starts a tile, so that tile's one key before it
        # (the first query's oldest) fills the program's first tile alone: fully masked for 543.
        "sliding, first tile masked, scores negative": same_as_plain(kernels, 543, 256, True, True),
        "sliding, first tile masked, scores random": same_as_plain(kernels, 543, 256, True, False),
        "sliding, 575 (first tile masked), scores negative": same_as_plain(kernels, 575, 256, True, True),
        "sliding, 544 (first tile not masked), scores negative": same_as_plain(kernels, 544, 256, True, True),
        "sliding, 287 (within the first window), scores negative": same_as_plain(
            kernels, 287, 256, True, True
        ),
        "full, 543, scores negative": same_as_plain(kernels, 543, 512, False, True),
    }
    platform = type(kernels.current_platform)
    family = platform.is_device_capability_family
    platform.is_device_capability_family = classmethod(
        lambda cls, capability, device_id=0: capability // 10 == 10
    )
    try:  # Blackwell: a step with more than one query takes the "tuned" 128-key tiles for head_dim 256
        out["b200: sliding, 600, scores random"] = same_as_plain(kernels, 600, 256, True, False)
        out["b200: full, 600, scores random"] = same_as_plain(kernels, 600, 512, False, False)
    finally:
        platform.is_device_capability_family = family
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    print("TRITON-INTERPRETED " + json.dumps(cases()))
