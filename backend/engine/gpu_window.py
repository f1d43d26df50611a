"""The context window on a GPU, from the card: what the memory plan leaves a path for its KV cache,
up to the model's own maximum.

A path's share of the card (``MemoryPlan.share``) holds its weights, its drafter's, the runtime
(``footprint``) and the KV cache; the window is the largest multiple of ``STEP`` tokens for which
``PAGE_MARGIN`` requests of the whole window fit in the rest — never above the model's
``max_position_embeddings``, never below ``FLOOR`` (the plan is made with ``FLOOR`` tokens of KV,
so every planned engine has at least that). ``max_model_len`` in the settings still wins.

Gemma 4's sliding layers hold only their window, so the KV of a long context is the full-attention
layers' (E2B: 128K tokens ≈ 0.76 GiB a request by its config): most cards that hold the weights
give the model's whole window. The margin is carried over from the CPU build, where vLLM's
per-group pages held 2.7x fewer requests than the config's count (measured on the demo model);
on a GPU it is an estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from backend.engine.footprint import GIB, kv_bytes_per_request
from backend.engine.memory_plan import MemoryPlan

FLOOR = 8192
"""Tokens every planned engine holds: a 32-frame video (2,496 tokens) with its prompt, the tool
declarations and a long reply."""
STEP = 1024
PAGE_MARGIN = 3
"""Full-window requests the KV room must hold by the config's count (vLLM's pages hold fewer)."""


@dataclass(frozen=True)
class CardWindow:
    tokens: int
    why: str


def model_max_len(model: Path) -> int:
    config = json.loads((model / "config.json").read_text())
    text = config.get("text_config", config)
    return int(text.get("max_position_embeddings", 131072))


def plan_tokens(model: Path) -> int:
    """The window the memory plan sizes each path's KV for: ``FLOOR`` or the model's maximum."""
    return min(FLOOR, model_max_len(model))


def card_window(model: Path, dtype: str, plan: MemoryPlan) -> CardWindow:
    """The window both paths' engines get (the smaller of the two: flipping paths never shrinks a
    chat's room), with the arithmetic of the path that sets it."""
    return min((_path_window(model, dtype, plan, name) for name in plan.footprints), key=lambda w: w.tokens)


def kv_room(plan: MemoryPlan, profile: str) -> int:
    """Bytes of ``profile``'s share left for its KV cache: the share less weights, drafter and
    runtime (negative where they do not fit)."""
    footprint = plan.footprints[profile]
    fixed = footprint.weights.bytes + footprint.runtime.bytes
    fixed += footprint.drafter.bytes if footprint.drafter is not None else 0
    return int(plan.share(profile) * plan.gpu.total_bytes) - fixed


def _path_window(model: Path, dtype: str, plan: MemoryPlan, profile: str) -> CardWindow:
    footprint = plan.footprints[profile]
    share, total_bytes = plan.share(profile), plan.gpu.total_bytes
    most = model_max_len(model)
    room = kv_room(plan, profile)

    def fits(tokens: int) -> bool:
        return PAGE_MARGIN * kv_bytes_per_request(model, tokens, dtype).bytes <= room

    floor = min(FLOOR, most)
    if fits(most):
        tokens = most
    elif not fits(floor):
        tokens = floor
    else:
        low, high = floor // STEP, most // STEP  # fits(low * STEP), not fits(high * STEP)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle * STEP) else (low, middle)
        tokens = max(floor, low * STEP)
    need = PAGE_MARGIN * kv_bytes_per_request(model, tokens, dtype).bytes
    drafter = f" − drafter {footprint.drafter.gib:.1f}" if footprint.drafter is not None else ""
    arithmetic = (
        f"the {profile} path's share {share:g} of {total_bytes / GIB:.0f} GiB = "
        f"{share * total_bytes / GIB:.1f} GiB − weights {footprint.weights.gib:.1f}{drafter} − runtime "
        f"{footprint.runtime.gib:.1f} (estimate) leaves {max(room, 0) / GIB:.1f} GiB for KV; "
        f"{PAGE_MARGIN} requests of {tokens} tokens need {need / GIB:.2f} GiB"
    )
    if tokens == most:
        limit = f"the model's maximum ({most})"
    elif tokens == floor and not fits(floor):
        limit = f"the least planned ({floor}): a long chat or a video may not fit"
    else:
        limit = f"the most that fits (the model allows {most})"
    return CardWindow(tokens, f"context window from the card, {limit}: {arithmetic}")
