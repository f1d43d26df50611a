"""What vLLM runs Gemma 4's attention on for a card, and the other backends worth measuring there:
only those that can start for this model in this environment, each one left out said with why.

Said, not set: stock vLLM picks the backend; the optimized path changes it only where
``paths --measure`` found another faster with the same tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from backend.engine.gpu.card import GpuFacts, GpuRefused
from backend.engine.gpu.flashinfer_kernels import flashinfer_kernels_missing, installed_version

VLLM_PRIORITY: dict[int | None, tuple[str, ...]] = {
    10: ("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"),
    None: ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"),
}
"""vLLM 0.32's attention priority by compute-capability major (``None``: every other card): its
``_get_backend_priorities`` in ``vllm/platforms/cuda.py`` for Gemma 4's case (not MLA, causal, no
multimodal prefix: ``gemma4`` is not an mm-prefix model). It cannot be called here (the CPU build
lacks ``vllm._C_stable_libtorch``, which that module imports); ``tests/engine/gpu/test_gpu_attention.py``
compares this table with it in a subprocess that stubs that module."""

SLIDING_FLASH_ATTENTION: dict[str, object] = {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}
"""vLLM 0.32's per-layer-kind override: FlashAttention for Gemma 4's 256-dim sliding layers, the
512-dim full layers left on Triton. A candidate to measure on cards where vLLM runs Triton for all."""

FULL_FLASHINFER: dict[str, object] = {"backend_per_kind": {"full_attention": "FLASHINFER"}}
FULL_FLEX_ATTENTION: dict[str, object] = {"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}}
"""The other backends vLLM 0.32 offers for Gemma 4's 512-dim full layers on Ampere and Ada
(FlashInfer lists head_dim 512; FlexAttention takes any), the sliding layers left as vLLM chose.
Per layer kind, not ``backend``: the drafter's sliding layers keep Triton, the one backend vLLM's
Gemma 4 proposer gives them (``backend.compat.speculation.drafter_attention``)."""


@dataclass(frozen=True)
class ModelAttention:
    """What in a model's config decides whether a backend can start its full-attention layers."""

    kv_shared_full_layers: int
    """Full layers that read an earlier layer's KV cache (Gemma 4's last ``num_kv_shared_layers``
    layers: vLLM's ``Gemma4Attention`` gives them a ``kv_sharing_target_layer_name``)."""
    logit_softcap: bool = False
    """``attn_logit_softcapping`` set: vLLM passes it to every attention layer."""

    @classmethod
    def read(cls, model: Path) -> ModelAttention:
        config = json.loads((model / "config.json").read_text())
        text = config.get("text_config") or config
        count = int(text.get("num_hidden_layers") or len(text.get("layer_types") or []))
        layers = list(text.get("layer_types") or ["full_attention"] * count)
        first_shared = count - int(text.get("num_kv_shared_layers") or 0)
        shared = sum(1 for kind in layers[first_shared:count] if kind == "full_attention")
        return cls(shared, bool(text.get("attn_logit_softcapping")))

    def flex_refusal(self) -> str:
        """Why vLLM 0.32's ``FlexAttentionImpl`` would raise for the full layers ("" when it would not)."""
        if self.kv_shared_full_layers:
            return (
                f"FlexAttention cannot start this model's {self.kv_shared_full_layers} KV-shared full "
                "layers (vLLM 0.32: 'FlexAttention does not support kv sharing yet')"
            )
        if self.logit_softcap:
            return "FlexAttention cannot start with attention logit soft-capping (vLLM 0.32 refuses it)"
        return ""


def _fa4(capability: tuple[int, int], fa4_available: bool | None) -> bool:
    return capability[0] in (9, 10) if fa4_available is None else fa4_available


def _takes_gemma4(backend: str, capability: tuple[int, int], fa4: bool) -> bool:
    """Whether vLLM's selector accepts a backend for Gemma 4's head sizes (256 and 512, sliding
    window) on the card: FlashAttention takes 512 only as FA4; FlashInfer lists 512 for 8.0–12.1."""
    if backend == "FLASH_ATTN":
        return fa4
    if backend == "FLASHINFER":
        return (8, 0) <= capability <= (12, 1)
    return backend == "TRITON_ATTN"


def vllm_attention(capability: tuple[int, int], fa4_available: bool | None = None) -> str:
    """The backend vLLM 0.32 runs every Gemma 4 layer on: its ``Gemma4Config`` rule
    (``vllm/model_executor/models/config.py``) forces Triton where FlashAttention 4 does not
    support the card (head_dim 512 rules out FA2/3); elsewhere it sets FA4 and leaves the choice to
    the selector, which takes the first backend in its priority for the card that fits."""
    fa4 = _fa4(capability, fa4_available)
    if not fa4:
        return "TRITON_ATTN"
    order = VLLM_PRIORITY.get(capability[0], VLLM_PRIORITY[None])
    return next(name for name in order if _takes_gemma4(name, capability, fa4))


def expected_attention(capability: tuple[int, int], fa4_available: bool | None = None) -> str:
    """vLLM's choice for the card, said with why (``paths`` prints it). FlashInfer is said as
    vLLM's CUDA build has it (its ``requirements/cuda.txt`` installs ``flashinfer-python``), with
    what this environment lacks for it."""
    backend = vllm_attention(capability, fa4_available)
    major = f"{capability[0]}.x"
    if backend == "TRITON_ATTN":
        return "TRITON_ATTN (all layers: no FlashAttention 4 for this card, FA2/3 have no head_dim 512)"
    if backend == "FLASH_ATTN":
        return f"FLASH_ATTN (FlashAttention 4, all layers: first in vLLM's priority on {major})"
    said = f"{backend} (all layers: first in vLLM's priority on {major}, before FlashAttention 4)"
    if installed_version("flashinfer-python") is None:
        return f"{said}; this environment has no flashinfer-python, where vLLM takes FlashAttention 4"
    missing = flashinfer_kernels_missing()
    return f"{said}; {missing}" if missing else said


@dataclass(frozen=True)
class AttentionCandidates:
    """The ``attention_config`` values to measure beside vLLM's own on a card, and those left out."""

    others: tuple[dict[str, object], ...]
    left_out: tuple[tuple[dict[str, object], str], ...] = ()
    """Each config that cannot start for this model here, with why."""


def attention_candidates(
    capability: tuple[int, int], model: ModelAttention, fa4_available: bool | None = None
) -> AttentionCandidates:
    """On cards where vLLM runs Triton: FlashAttention for the sliding layers, and FlashInfer or
    FlexAttention for the full ones — FlashInfer only where its precompiled kernels are installed,
    FlexAttention only for a model whose full layers it can start (``paths --measure`` measures
    them, ``bench`` gives each its rows). None elsewhere: vLLM runs one fast backend on all layers."""
    if vllm_attention(capability, fa4_available) != "TRITON_ATTN":
        return AttentionCandidates(())
    checked = (
        (SLIDING_FLASH_ATTENTION, ""),
        (FULL_FLASHINFER, flashinfer_kernels_missing()),
        (FULL_FLEX_ATTENTION, model.flex_refusal()),
    )
    return AttentionCandidates(
        others=tuple(config for config, why in checked if not why),
        left_out=tuple((config, why) for config, why in checked if why),
    )


def check_flashinfer_kernels(gpu: GpuFacts, exact: bool) -> None:
    """Refuse this machine's card where vLLM would run every layer on FlashInfer (Blackwell: first
    in vLLM's priority there) without its precompiled kernels: FlashInfer would compile Gemma 4's
    512-dim attention with nvcc, or download it, at the first start (minutes; a failed start
    offline). Exact mode runs Triton on every layer, so it needs none."""
    if exact or gpu.described or vllm_attention(gpu.capability) != "FLASHINFER":
        return
    flashinfer = installed_version("flashinfer-python")
    missing = flashinfer_kernels_missing() if flashinfer is not None else ""
    if not missing:
        return
    raise GpuRefused(
        f"On {gpu.name} vLLM runs every Gemma 4 layer on FlashInfer, and {missing}.",
        f"Install them into gemma-chat's environment: `vllm download-kernels`, or `pip install "
        f"flashinfer-cubin=={flashinfer} flashinfer-jit-cache=={flashinfer}` from FlashInfer's index for "
        "your CUDA (https://flashinfer.ai/whl/); or set exact = true (Triton on every layer, slower).",
    )
