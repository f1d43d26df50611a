"""How the optimized path's drafts fall as concurrency rises on a GPU.

Both paths batch what ``vllm serve`` would on the card (``backend.engine.gpu.serve_limits``), so no
speed-up is credited to batch limits.

Drafts: a verifying step reads the weights once for ``1 + k`` tokens a request; with few requests
the card waits on memory and drafts are nearly free, with many it is compute-bound and each
rejected draft is work thrown away. ``draft_schedule`` keeps the path's drafts up to
``FULL_DRAFTS_UP_TO`` running requests, one draft up to ``ONE_DRAFT_UP_TO``, none above (vLLM's
``num_speculative_tokens_per_batch_size``). Those thresholds are estimates from that reasoning;
``paths --measure`` measures them on the card (``backend.engine.probe.by_load``), and a
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
    ``paths --measure`` did, else the estimated thresholds (``draft_schedule``)."""
    if measured is not None and measured.method != "none" and measured.by_load is not None:
        steps = measured.by_load
        return vllm_schedule(steps, max_num_seqs), f"; by load, measured here: {describe_steps(steps)}"
    return draft_schedule(drafts, max_num_seqs), draft_schedule_why(drafts)


def _request_counts(most: int) -> list[int]:
    """vLLM's grid of request counts for decode graphs (``VllmConfig._set_cudagraph_sizes``): 1, 2,
    4, every 8 to 248, every 16 from 256, and ``most`` itself."""
    counts = [n for n in (1, 2, 4) if n <= most]
    counts += list(range(8, min(most + 1, 256), 8))
    counts += list(range(256, most + 1, 16))
    return sorted({*counts, most})


def graph_sizes(max_num_seqs: int, drafts: int, max_batched_tokens: int) -> list[int]:
    """CUDA graph capture sizes for every draft level the optimized engine may run, 0 to
    ``drafts``: each request count of vLLM's grid times ``1 + j`` tokens (a decode step of ``j``
    drafts is that many tokens a request), up to the step's token budget. vLLM's default stops at
    512 tokens (1,024 on Blackwell), so 256 requests verifying 2 drafts (768 tokens) would run
    eager while no drafts replay a graph: drafts by load would be measured against the graph, not
    the drafts."""
    sizes = {n * (1 + level) for level in range(drafts + 1) for n in _request_counts(max_num_seqs)}
    return sorted(size for size in sizes if size <= max_batched_tokens)


def graph_config(max_num_seqs: int, drafts: int, max_batched_tokens: int) -> tuple[dict[str, object], str]:
    """The optimized GPU engine's ``compilation_config`` for ``graph_sizes``, with why."""
    sizes = graph_sizes(max_num_seqs, drafts, max_batched_tokens)
    why = (
        f"CUDA graphs for every draft level (0 to {drafts}) up to {max_num_seqs} requests: {len(sizes)} "
        f"sizes up to {sizes[-1] if sizes else 0} tokens (vLLM's default stops at 512, where 256 requests "
        "verifying 2 drafts would run eager and no drafts would win by the graph alone)"
    )
    return {"cudagraph_capture_sizes": sizes}, why
