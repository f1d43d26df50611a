"""The vLLM arguments and environment a GPU adds to an engine path: its share of memory from the
plan, sleep mode where the plan swaps engines, batch-invariant mode for ``exact``. What vLLM picks
for attention on the card, and the other candidates, is ``backend.engine.gpu.attention``."""

from __future__ import annotations

from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.gpu.memory_plan import MemoryPlan

BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"


def gpu_arguments(plan: MemoryPlan, path: str) -> dict[str, Argument]:
    share = plan.share(path)
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
