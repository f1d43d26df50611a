"""The Gemma 4 drafter keeps its own attention when the target's is chosen per layer kind.

vLLM 0.32's ``attention_config.backend_per_kind`` (``{"sliding_window": "FLASH_ATTN"}``: the
optimized GPU path's measured candidate on cards where vLLM runs Gemma 4 on Triton) takes
precedence over ``backend`` in the attention selector. Both of vLLM's model runners build the
drafter's config from the target's, replacing only the model and ``backend``, and the drafter's
layers pick their backend under that config (``get_model`` makes it the current one), so the map
reached the drafter too — and vLLM's own Gemma 4 code says the drafter's sliding layers cannot run
on FlashAttention with the KV-shared cache (its ``_create_draft_vllm_config`` docstrings).

Each runner has its own class, so both are patched: ``Gemma4Proposer`` (Model Runner V1: the CPU
build, which has no Triton) and ``Gemma4Speculator`` (Model Runner V2: vLLM's default on a CUDA
card). The map is dropped from the drafter's config: the drafter attends exactly as it does
without the candidate (the target's backend, which vLLM's override carries through). Standard
library only until one of vLLM's modules is imported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import wrap

DRAFTER_CLASSES = {
    "vllm.v1.spec_decode.gemma4": "Gemma4Proposer",
    "vllm.v1.worker.gpu.spec_decode.gemma4.speculator": "Gemma4Speculator",
}
"""Where each model runner's Gemma 4 drafter class lives (V1, then V2)."""

_PATCHED = "_gemma_chat_drafter_attention"


def _without_per_kind(create: Any) -> Any:
    def _create_draft_vllm_config(self: Any) -> Any:
        config = create(self)
        attention = config.attention_config
        if not attention.backend_per_kind:
            return config
        return replace(config, attention_config=replace(attention, backend_per_kind={}))

    return _create_draft_vllm_config


def patch(module: Any) -> None:
    """Optional: a vLLM without the drafter class gets a line in its log, no patch."""
    target = f"{DRAFTER_CLASSES[module.__name__]}._create_draft_vllm_config"
    wrap(
        module,
        {target: _without_per_kind},
        mark=_PATCHED,
        label="drafter attention",
        on_class=True,
        optional=True,
    )


def install_import_hook() -> None:
    for module in DRAFTER_CLASSES:
        after_import(module, patch)
