"""The scheduler limits ``vllm serve`` picks on a card, which both engine paths get.

An engine built in a process (``AsyncLLM``, vLLM's ``ENGINE_CONTEXT``) is missing from vLLM's
default tables and falls back to ``SchedulerConfig``'s 128 requests and 2,048 tokens a step on any
card, while ``vllm serve`` (``UsageContext.OPENAI_API_SERVER``) batches 256 requests on an A100 or
an L4 and 1,024 on an H100 or a B200 (vLLM 0.32's ``EngineArgs.get_batch_defaults``). A baseline at
the in-process defaults would be a throttled stock engine, and the optimized path's speed-up at 256
requests would be its batch limits'. So both paths get the numbers ``vllm serve`` would use on the
card (``serve_limits``).

The table is vLLM's, kept here for one GPU so the memory plan needs no vLLM import (importing
``vllm.engine.arg_utils`` takes 8-15 s here); ``tests/engine/gpu/test_gpu_vllm_config.py`` checks it against
vLLM's own function and against the scheduler ``vllm serve``'s context builds, on a faked card for
each size. The device name matters: vLLM keeps an A100 of 80 GB on the small table (a larger step
lowered its throughput, vLLM PR 17885).
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.engine.argument import Argument
from backend.engine.gpu.card import GpuFacts
from backend.engine.model.footprint import GIB

LARGEST_GIB = 160
"""vLLM's "B200/B300" row: 1,024 requests, 16,384 tokens."""
LARGE_GIB = 70
"""vLLM's "H100/H200" row (not an A100): 1,024 requests, 8,192 tokens."""


@dataclass(frozen=True)
class ServeLimits:
    max_num_seqs: int
    max_num_batched_tokens: int

    def arguments(self, card: str) -> dict[str, Argument]:
        why = (
            f"what `vllm serve` uses on {card} (vLLM's default table for its API server; an engine "
            "in a process would get 128 and 2,048): both paths get it, so no speed-up is the batch limits'"
        )
        return {
            "max_num_seqs": Argument(self.max_num_seqs, f"requests a step batches, {why}"),
            "max_num_batched_tokens": Argument(
                self.max_num_batched_tokens, f"tokens a step schedules, {why}"
            ),
        }


def serve_limits(gpu: GpuFacts) -> ServeLimits:
    """``max_num_seqs`` and ``max_num_batched_tokens`` of ``vllm serve`` on one ``gpu``."""
    if gpu.total_bytes >= LARGEST_GIB * GIB:
        return ServeLimits(1024, 16384)
    if gpu.total_bytes >= LARGE_GIB * GIB and "a100" not in gpu.name.lower():
        return ServeLimits(1024, 8192)
    return ServeLimits(256, 2048)
