"""The target's per-layer-kind attention stays off the Gemma 4 drafter, on both of vLLM's runners.

vLLM's own drafter classes run here — ``Gemma4Proposer`` (Model Runner V1, the CPU build's) and
``Gemma4Speculator`` (V2, a card's) — each patched by the import hook the environment installs,
their ``_create_draft_vllm_config`` called on a stand-in target config holding vLLM's real
``AttentionConfig`` (a real ``VllmConfig`` needs a model; tests/engine/gpu/test_gpu_vllm_config.py builds
one for the faked card and runs V2's speculator on it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from backend.compat.speculation import drafter_attention

SLIDING_FLASH = {"sliding_window": "FLASH_ATTN"}


@dataclass(frozen=True)
class _TargetConfig:
    """The fields vLLM's ``_create_draft_vllm_config`` reads and replaces (both runners)."""

    model_config: Any
    attention_config: Any


def _drafter_class(module_name: str) -> Any:
    return getattr(importlib.import_module(module_name), drafter_attention.DRAFTER_CLASSES[module_name])


def _draft_attention(drafter_class: Any, per_kind: dict[str, str], *, hooked: bool = True) -> Any:
    from vllm.config import AttentionConfig

    drafter = drafter_class.__new__(drafter_class)
    attention = AttentionConfig(backend="TRITON_ATTN", backend_per_kind=per_kind)  # type: ignore[arg-type]
    drafter.vllm_config = _TargetConfig("target model", attention)
    drafter.speculative_config = SimpleNamespace(
        draft_model_config="drafter model", moe_backend=None, attention_backend=None, kv_cache_dtype=None
    )
    create = drafter_class._create_draft_vllm_config
    return (create if hooked else create.__wrapped__)(drafter).attention_config


RUNNERS = pytest.mark.parametrize("module_name", list(drafter_attention.DRAFTER_CLASSES))


@RUNNERS
def test_vllm_alone_passes_the_targets_map_to_the_drafter(module_name: str) -> None:
    """Why the patch exists, on each runner: vLLM carries the target's backend and its map over."""
    attention = _draft_attention(_drafter_class(module_name), SLIDING_FLASH, hooked=False)
    assert attention.backend.name == "TRITON_ATTN"
    assert {k: v.name for k, v in attention.backend_per_kind.items()} == SLIDING_FLASH


@RUNNERS
def test_the_hooked_drafter_attends_as_without_the_map(module_name: str) -> None:
    drafter_class = _drafter_class(module_name)
    attention = _draft_attention(drafter_class, SLIDING_FLASH)
    assert attention.backend.name == "TRITON_ATTN" and attention.backend_per_kind == {}
    assert _draft_attention(drafter_class, {}) == attention


@RUNNERS
def test_patching_again_wraps_once(module_name: str) -> None:
    drafter_class = _drafter_class(module_name)
    patched = drafter_class._create_draft_vllm_config
    drafter_attention.patch(importlib.import_module(module_name))
    assert drafter_class._create_draft_vllm_config is patched
    assert not hasattr(patched.__wrapped__, "__wrapped__")
