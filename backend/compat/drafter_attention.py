"""The Gemma 4 drafter keeps its own attention when the target's is chosen per layer kind.

vLLM 0.32's ``attention_config.backend_per_kind`` (``{"sliding_window": "FLASH_ATTN"}``: the
optimized GPU path's measured candidate on cards where vLLM runs Gemma 4 on Triton) takes
precedence over ``backend`` in the attention selector. The speculative proposer builds the
drafter's config from the target's, replacing only ``backend`` (``llm_base_proposer``), so the map
reached the drafter too — and vLLM's Gemma 4 proposer says its sliding layers cannot run on
FlashAttention with the KV-shared cache (``Gemma4Proposer._create_draft_vllm_config``). This drops
the map from the drafter's config: the drafter attends exactly as it does without the candidate
(the target's backend, which that override carries through). Standard library only until vLLM's
module is imported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backend.compat.after_import import after_import

MODULE = "vllm.v1.spec_decode.gemma4"
_PATCHED = "_gemma_chat_drafter_attention"


def patch(module: Any) -> None:
    proposer_class = getattr(module, "Gemma4Proposer", None)
    if proposer_class is None or getattr(module, _PATCHED, False):
        return
    create = proposer_class._create_draft_vllm_config

    def _create_draft_vllm_config(self: Any) -> Any:
        config = create(self)
        attention = config.attention_config
        if not attention.backend_per_kind:
            return config
        return replace(config, attention_config=replace(attention, backend_per_kind={}))

    _create_draft_vllm_config.__wrapped__ = create  # type: ignore[attr-defined]
    proposer_class._create_draft_vllm_config = _create_draft_vllm_config
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
