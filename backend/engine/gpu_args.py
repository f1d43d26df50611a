"""The vLLM arguments and environment a GPU adds to an engine path: its share of memory from the
plan, sleep mode where the plan swaps engines, batch-invariant mode for ``exact``, and what vLLM
will pick for attention on the card (said, not set: stock vLLM picks it; the optimized path
changes it only where ``profiles --measure`` found another faster with the same tokens)."""

from __future__ import annotations

from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.memory_plan import MemoryPlan

BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"


def gpu_arguments(plan: MemoryPlan, profile: str) -> dict[str, Argument]:
    share = plan.share(profile)
    if plan.mode == "swap":
        why = "the whole setting: this engine is alone on the GPU (the plan swaps engines)"
    else:
        why = "this engine's share: both paths' engines fit side by side (shares add up to the setting)"
    args = {"gpu_memory_utilization": Argument(share, why)}
    if plan.sleep_mode:
        args["enable_sleep_mode"] = Argument(
            True, "swapping puts this engine to sleep (weights to host memory) instead of stopping it"
        )
        args["sleep_mode_offload_cudagraph"] = Argument(
            True, "its CUDA graphs go to host memory with the weights while it sleeps (room for the other)"
        )
    return args


def gpu_env(settings: EngineSettings) -> dict[str, Argument]:
    if not settings.exact:
        return {}
    return {
        BATCH_INVARIANT_ENV: Argument(
            1, "exact = true: batch-invariant kernels, so a verifying step sums like a plain one (slower)"
        )
    }


EXACT_ATTENTION: dict[str, object] = {"backend": "TRITON_ATTN"}
"""Exact mode's attention on every card: Triton has batch-invariant kernels for Gemma 4's head_dim
256 and 512. Left to vLLM, Hopper and Blackwell get FlashAttention, which falls back to FA2 under
batch invariance (``fa_utils.get_flash_attn_version``) — and FA2 has no 512-dim kernel."""


def exact_attention(settings: EngineSettings) -> Argument | None:
    """The ``attention_config`` exact mode needs (None when ``exact`` is off)."""
    if not settings.exact:
        return None
    return Argument(
        dict(EXACT_ATTENTION),
        "exact = true: Triton attention on every layer (batch-invariant kernels for head_dim 256 and "
        "512; FlashAttention would fall back to FA2 under batch invariance, which has no 512-dim kernel)",
    )


def expected_attention(capability: tuple[int, int], fa4_available: bool | None = None) -> str:
    """What vLLM 0.32 runs Gemma 4's attention on for a card (its ``Gemma4Config`` rule): head_dim
    512 rules out FlashAttention 2/3, so FlashAttention 4 where its wheel supports the card (Hopper,
    Blackwell), else Triton attention for every layer."""
    fa4 = capability[0] in (9, 10) if fa4_available is None else fa4_available
    if fa4:
        return "FLASH_ATTN (FlashAttention 4, all layers)"
    return "TRITON_ATTN (all layers: no FlashAttention for head_dim 512 on this card)"


SLIDING_FLASH_ATTENTION: dict[str, object] = {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}
"""vLLM 0.32's per-layer-kind override: FlashAttention for Gemma 4's 256-dim sliding layers, the
512-dim full layers left on Triton. A candidate to measure on cards where vLLM runs Triton for all."""


FULL_FLASHINFER: dict[str, object] = {"backend_per_kind": {"full_attention": "FLASHINFER"}}
FULL_FLEX_ATTENTION: dict[str, object] = {"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}}
"""The other backends vLLM 0.32 offers for Gemma 4's 512-dim full layers on Ampere and Ada
(FlashInfer lists head_dim 512; FlexAttention takes any), the sliding layers left as vLLM chose.
Per layer kind, not ``backend``: the drafter's sliding layers keep Triton, the one backend vLLM's
Gemma 4 proposer gives them (``backend.compat.drafter_attention``)."""


def attention_candidates(
    capability: tuple[int, int], fa4_available: bool | None = None
) -> list[dict[str, object]]:
    """``attention_config`` values worth measuring on a card: vLLM's own choice (``{}``) first, and
    on Triton cards FlashAttention for the sliding layers and FlashInfer or FlexAttention for the
    full ones (``profiles --measure`` measures them, ``bench`` gives each its rows)."""
    if "TRITON" in expected_attention(capability, fa4_available):
        return [{}, SLIDING_FLASH_ATTENTION, FULL_FLASHINFER, FULL_FLEX_ATTENTION]
    return [{}]
