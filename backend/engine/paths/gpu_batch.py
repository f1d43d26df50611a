"""How the optimized path's drafts fall as concurrency rises on a GPU.

Both paths batch what ``vllm serve`` would on the card (``backend.engine.gpu.serve_limits``), so no
speed-up is credited to batch limits.

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

from backend.engine.speculation.choice import SpeculationChoice
from backend.engine.speculation.load_rule import describe_steps, vllm_schedule

FULL_DRAFTS_UP_TO = 16
ONE_DRAFT_UP_TO = 64


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
