"""The context window on a GPU, from the card: what the memory plan leaves a path for its KV cache,
up to the model's own maximum.

A path's share of the card (``MemoryPlan.share``) holds its weights, its drafter's, the runtime
(``footprint``) and the KV cache; the window is the largest multiple of ``STEP`` tokens for which
the rest holds ``WINDOW_MARGIN`` times what vLLM's own start check counts for one request of the
whole window — never above the model's ``max_position_embeddings``, never below ``FLOOR`` (the plan
is made with ``FLOOR`` tokens of KV, so every planned engine has at least that).
``max_model_len`` in the settings still wins.

vLLM's count (``vllm_kv_bytes``) is its own arithmetic at start (``kv_cache_utils.get_kv_cache_configs``:
the groups' blocks for one request of ``max_model_len``, plus the null block its pool holds back),
kept here for Gemma 4's two layer kinds so the plan needs no vLLM import;
``tests/engine/gpu/test_gpu_window.py`` compares it with vLLM's own functions on a faked card. It is
more than the config's count (``footprint.kv_bytes_per_request``): a sliding layer is charged its
window plus every token the engine may have in flight (two steps of scheduled tokens, async
scheduling), the full layers whole blocks, and the sliding layers' pages are unified with the full
layers'. For E2B at 131,072 tokens that is 0.94 GiB against the config's 0.76 on a card where `vllm
serve` schedules 8,192 tokens a step (``serve_limits``), both paths alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from backend.engine.gpu.card import GpuFacts
from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.gpu.serve_limits import serve_limits
from backend.engine.model.footprint import GIB, _dtype_bytes, layer_head_dim

FLOOR = 8192
"""Tokens every planned engine holds: a 32-frame video (2,496 tokens) with its prompt, the tool
declarations and a long reply."""
STEP = 1024
WINDOW_MARGIN = 1.5
"""How many times vLLM's own count for one request of the whole window the KV room must hold.
vLLM refuses to start below 1; the other half covers the runtime estimate (2.5 GiB) being that much
too low, or lets a second long chat in before the first is preempted. A judgement, not measured."""
BLOCK_TOKENS = 16
"""vLLM's block size on CUDA (``CacheConfig.block_size``); other layers' blocks hold as many bytes."""
CONCURRENT_STEPS = 2
"""Steps vLLM keeps in flight with async scheduling (``VllmConfig.max_concurrent_batches``)."""


@dataclass(frozen=True)
class CardWindow:
    tokens: int
    why: str


@dataclass(frozen=True)
class KvLayers:
    """A checkpoint's KV-owning layers as vLLM pages them: bytes a token takes in one layer of
    each kind, how many layers of each kind, and the sliding window."""

    full: int
    full_bytes_per_token: int
    sliding: int
    sliding_bytes_per_token: int
    window: int


def model_max_len(model: Path) -> int:
    config = json.loads((model / "config.json").read_text())
    text = config.get("text_config", config)
    return int(text.get("max_position_embeddings", 131072))


def plan_tokens(model: Path) -> int:
    """The window the memory plan sizes each path's KV for: ``FLOOR`` or the model's maximum."""
    return min(FLOOR, model_max_len(model))


def kv_layers(model: Path, dtype: str) -> KvLayers:
    config = json.loads((model / "config.json").read_text())
    text = config.get("text_config", config)
    kinds = list(text.get("layer_types") or ["full_attention"] * int(text["num_hidden_layers"]))
    owning = kinds[: len(kinds) - int(text.get("num_kv_shared_layers", 0))]
    per_head = 2 * int(text["num_key_value_heads"]) * _dtype_bytes(config, dtype)  # K and V
    full = [
        per_head * layer_head_dim(text, i, kind) for i, kind in enumerate(owning) if kind == "full_attention"
    ]
    sliding = [
        per_head * layer_head_dim(text, i, kind) for i, kind in enumerate(owning) if kind != "full_attention"
    ]
    return KvLayers(
        full=len(full),
        full_bytes_per_token=max(full, default=0),
        sliding=len(sliding),
        sliding_bytes_per_token=max(sliding, default=0),
        window=int(text.get("sliding_window") or 0),
    )


def in_flight_tokens(gpu: GpuFacts) -> int:
    """Tokens an engine on ``gpu`` may have scheduled and not yet settled (vLLM's
    ``max_in_flight_tokens``): two steps of its ``max_num_batched_tokens`` — what ``vllm serve``
    uses on that card, on both paths (``serve_limits``; 1 step without async scheduling, as with
    ngram: then this is an upper bound)."""
    return CONCURRENT_STEPS * serve_limits(gpu).max_num_batched_tokens


def vllm_kv_bytes(layers: KvLayers, tokens: int, in_flight: int) -> int:
    """What vLLM's start check counts for one request of ``tokens`` (its ``max_model_len``), with the
    null block its pool holds back: the KV room must hold at least this or vLLM refuses to start.

    Pages: every layer's block holds the bytes of ``BLOCK_TOKENS`` tokens of the widest layer
    (``unify_kv_cache_spec_page_size``). Groups: layers of a kind are split into groups of the
    smaller kind's count (padded; ``_get_kv_cache_groups_uniform_page_size``), and a block of the
    shared pool holds one page for each layer of a group. A request takes ``ceil(tokens / block)``
    blocks in each full group, and ``ceil(min(window - 1 + in_flight, tokens) / block) + 1`` in
    each sliding one (``SlidingWindowSpec.max_admission_blocks_per_request``)."""
    counts = [count for count in (layers.full, layers.sliding) if count]
    if not counts:
        return 0
    page = BLOCK_TOKENS * max(layers.full_bytes_per_token, layers.sliding_bytes_per_token)
    group = min(counts) if max(counts) >= 1.5 * min(counts) else max(counts)
    blocks = 0
    if layers.full:
        blocks += _cdiv(layers.full, group) * _cdiv(tokens, page // layers.full_bytes_per_token)
    if layers.sliding:
        held = min(layers.window - 1 + in_flight, tokens) if layers.window else tokens
        each = _cdiv(held, page // layers.sliding_bytes_per_token) + (1 if layers.window else 0)
        blocks += _cdiv(layers.sliding, group) * each
    return group * page * (blocks + 1)


def _cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` in integers (vLLM's ``cdiv``)."""
    return -(-a // b)


def card_window(model: Path, dtype: str, plan: MemoryPlan) -> CardWindow:
    """The window both paths' engines get (the smaller of the two: flipping paths never shrinks a
    chat's room), with the arithmetic of the path that sets it."""
    return min((_path_window(model, dtype, plan, name) for name in plan.footprints), key=lambda w: w.tokens)


def kv_room(plan: MemoryPlan, path: str) -> int:
    """Bytes of ``path``'s share left for its KV cache: the share less weights, drafter and
    runtime (negative where they do not fit)."""
    footprint = plan.footprints[path]
    fixed = footprint.weights.bytes + footprint.runtime.bytes
    fixed += footprint.drafter.bytes if footprint.drafter is not None else 0
    return int(plan.share(path) * plan.gpu.total_bytes) - fixed


def _path_window(model: Path, dtype: str, plan: MemoryPlan, path: str) -> CardWindow:
    footprint = plan.footprints[path]
    share, total_bytes = plan.share(path), plan.gpu.total_bytes
    most = model_max_len(model)
    room = kv_room(plan, path)
    layers, in_flight = kv_layers(model, dtype), in_flight_tokens(plan.gpu)

    def fits(tokens: int) -> bool:
        return WINDOW_MARGIN * vllm_kv_bytes(layers, tokens, in_flight) <= room

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
    need = vllm_kv_bytes(layers, tokens, in_flight)
    drafter = f" − drafter {footprint.drafter.gib:.1f}" if footprint.drafter is not None else ""
    arithmetic = (
        f"the {path} path's share {share:g} of {total_bytes / GIB:.0f} GiB = "
        f"{share * total_bytes / GIB:.1f} GiB − weights {footprint.weights.gib:.1f}{drafter} − runtime "
        f"{footprint.runtime.gib:.1f} (estimate) leaves {max(room, 0) / GIB:.1f} GiB for KV; vLLM counts "
        f"{need / GIB:.2f} GiB for a request of {tokens} tokens ({in_flight} in flight), "
        f"{WINDOW_MARGIN:g}× that is {WINDOW_MARGIN * need / GIB:.2f} GiB"
    )
    if tokens == most:
        limit = f"the model's maximum ({most})"
    elif tokens == floor and not fits(floor):
        limit = f"the least planned ({floor}): a long chat or a video may not fit"
    else:
        limit = f"the most that fits (the model allows {most})"
    return CardWindow(tokens, f"context window from the card, {limit}: {arithmetic}")
