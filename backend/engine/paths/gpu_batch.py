"""The optimized path's batch limits on a GPU, and how its drafts fall as concurrency rises.

Stock vLLM's engine context (the baseline) batches at most 128 requests a step
(``max_num_seqs``) and 2,048 scheduled tokens (``max_num_batched_tokens``), whatever the card. The
optimized path sizes both from its share of the card (``MemoryPlan``):

* ``max_num_seqs``: how many requests of ``TYPICAL_TOKENS`` (a chat turn with its history) fit in
  the KV room the plan leaves the path — ``PAGE_MARGIN`` times the config's count each — between
  ``FEWEST_SEQS`` and ``MOST_SEQS``. A card that holds more requests at once decodes more tokens
  per weight read; vLLM preempts past the cache anyway, so this is a ceiling, not a promise.
* ``max_num_batched_tokens``: ``BATCHED_TOKENS``, so a burst of new requests prefills in fewer
  steps beside the decoding ones.

Drafts: a verifying step reads the weights once for ``1 + k`` tokens a request; with few requests
the card waits on memory and drafts are nearly free, with many it is compute-bound and each
rejected draft is work thrown away. ``draft_schedule`` keeps the path's drafts up to
``FULL_DRAFTS_UP_TO`` running requests, one draft up to ``ONE_DRAFT_UP_TO``, none above (vLLM's
``num_speculative_tokens_per_batch_size``). Those thresholds are estimates from that reasoning;
``profiles --measure`` measures them on the card (``backend.engine.probe.by_load``), and a
measured schedule replaces them (``gpu_draft_schedule``). Tokens cannot move with them: drafts only
decide how many tokens a step may accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.gpu.window import BATCHED_TOKENS as BATCHED_TOKENS  # its own setting, kept by the window
from backend.engine.gpu.window import kv_room
from backend.engine.model.footprint import kv_bytes_per_request
from backend.engine.speculation.choice import SpeculationChoice
from backend.engine.speculation.load_rule import describe_steps, vllm_schedule

TYPICAL_TOKENS = 2048
MOST_SEQS = 256
FEWEST_SEQS = 8
FULL_DRAFTS_UP_TO = 16
ONE_DRAFT_UP_TO = 64
PAGE_MARGIN = 3
"""Times the config's count a request of ``TYPICAL_TOKENS`` is charged: vLLM's admission counts a
sliding layer's window plus every token in flight (2x the config's count for E2B at 2,048 tokens,
``gpu_window.vllm_kv_bytes``), and a decoding request holds less; an estimate."""
STOCK_SEQS = 128
"""vLLM's own ``max_num_seqs`` for an engine started in a process (the baseline keeps it)."""


@dataclass(frozen=True)
class BatchLimits:
    max_num_seqs: int
    why: str


def batch_limits(model: Path, dtype: str, plan: MemoryPlan, profile: str) -> BatchLimits:
    """The most requests a step of ``profile``'s engine batches, with its arithmetic."""
    room = kv_room(plan, profile)
    each = PAGE_MARGIN * kv_bytes_per_request(model, TYPICAL_TOKENS, dtype).bytes
    fit = room // each if each > 0 else MOST_SEQS
    seqs = max(FEWEST_SEQS, min(MOST_SEQS, int(fit)))
    if seqs == MOST_SEQS:
        limit = f"the most gemma-chat batches ({MOST_SEQS})"
    elif seqs == FEWEST_SEQS and fit < FEWEST_SEQS:
        limit = f"the fewest it plans ({FEWEST_SEQS}): longer chats wait their turn"
    else:
        limit = "as many as fit"
    why = (
        f"requests a step batches, {limit}: {max(room, 0) / (1 << 30):.1f} GiB of KV room holds {int(fit)} "
        f"requests of {TYPICAL_TOKENS} tokens at {each / (1 << 20):.0f} MiB each ({PAGE_MARGIN}× the "
        f"config's count); vLLM's default is {STOCK_SEQS}"
    )
    return BatchLimits(seqs, why)


def draft_schedule(drafts: int, max_num_seqs: int) -> list[list[int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for ``drafts`` drafts a step: all of them
    up to ``FULL_DRAFTS_UP_TO`` running requests, one up to ``ONE_DRAFT_UP_TO``, none above; the
    ranges end at ``max_num_seqs`` (no step runs more)."""
    ranges = [
        (1, FULL_DRAFTS_UP_TO, drafts),
        (FULL_DRAFTS_UP_TO + 1, ONE_DRAFT_UP_TO, min(1, drafts)),
        (ONE_DRAFT_UP_TO + 1, max_num_seqs, 0),
    ]
    return [[start, min(end, max_num_seqs), k] for start, end, k in ranges if start <= max_num_seqs]


def draft_schedule_why(drafts: int) -> str:
    return (
        f"; {drafts} drafts up to {FULL_DRAFTS_UP_TO} running requests, 1 up to {ONE_DRAFT_UP_TO}, "
        "none above "
        "(a busy card is compute-bound: rejected drafts are work thrown away; thresholds estimated, "
        "not measured on a card)"
    )


def gpu_draft_schedule(
    drafts: int, max_num_seqs: int, measured: SpeculationChoice | None
) -> tuple[list[list[int]], str]:
    """The optimized GPU engine's drafts by running requests, with why: measured by load where
    ``profiles --measure`` did, else the estimated thresholds (``draft_schedule``)."""
    if measured is not None and measured.method != "none" and measured.by_load is not None:
        steps = measured.by_load
        return vllm_schedule(steps, max_num_seqs), f"; by load, measured here: {describe_steps(steps)}"
    return draft_schedule(drafts, max_num_seqs), draft_schedule_why(drafts)
