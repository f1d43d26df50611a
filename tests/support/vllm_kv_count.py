"""vLLM's own count of the KV cache one request of a window takes, for the app's GPU arguments.

Run in a fresh interpreter (``python tests/support/vllm_kv_count.py MODEL``) under the faked CUDA platform
(``tests/support/fake_cuda.py``, an L4): for each path, ``AsyncEngineArgs(**the app's arguments)
.create_engine_config()``; the KV-owning layers' specs as ``Attention.get_kv_cache_spec`` builds
them on Triton (the sliding layers' block from ``_largest_kernel_block_within``); the layout from
vLLM's ``resolve_kv_cache_layout``; the groups from ``get_kv_cache_groups``; and for each window
what ``get_kv_cache_configs`` checks the available memory against:
``_max_memory_usage_bytes_from_groups`` plus the null block (``_pool_bytes_per_block``). Prints
one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

WINDOWS = (8192, 32768, 80896, 130048, 131072)


def counts(model: Path) -> dict[str, Any]:
    import torch
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.model_executor.layers.attention.attention import _largest_kernel_block_within
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    from backend.config.settings import EngineSettings
    from backend.engine.model.source import resolve
    from backend.engine.paths.engine_args import EnginePath, engine_config
    from backend.engine.paths.placement import plan_for

    source, settings = resolve(str(model)), EngineSettings()
    plan = plan_for(source, settings)
    text = json.loads((model / "config.json").read_text())["text_config"]
    kinds = text["layer_types"][: len(text["layer_types"]) - text["num_kv_shared_layers"]]
    out: dict[str, Any] = {}
    for name in ("baseline", "optimized"):
        config = engine_config(EnginePath.named(name), source, settings, 1, plan)
        built = AsyncEngineArgs(**config.engine_kwargs(), skip_tokenizer_init=True).create_engine_config()
        block = built.cache_config.block_size
        specs: dict[str, Any] = {}
        for index, kind in enumerate(kinds):
            if kind == "full_attention":
                head = int(text["global_head_dim"])
                specs[f"layers.{index}"] = FullAttentionSpec(
                    block_size=block, num_kv_heads=1, head_size=head, dtype=torch.bfloat16
                )
                continue
            one = SlidingWindowSpec(
                block_size=1,
                num_kv_heads=1,
                head_size=text["head_dim"],
                dtype=torch.bfloat16,
                sliding_window=text["sliding_window"],
            )
            per_token = one.real_page_size_bytes
            sliding = _largest_kernel_block_within(
                TritonAttentionBackend, per_token, per_token * block, block, one
            )
            # get_kv_cache_configs tags sliding specs so for multi-step drafters
            retained = max(0, built.num_prefill_lookahead_tokens - 1)
            specs[f"layers.{index}"] = replace(one, block_size=sliding, extra_retained_tokens=retained)
        layouts = [layout.name for layout in get_supported_kv_cache_layouts([TritonAttentionBackend])]
        built.cache_config.kv_cache_layout = resolve_kv_cache_layout(
            built, [layouts], list(specs.values())
        ).name
        groups = kv_cache_utils.get_kv_cache_groups(built, dict(specs))
        null_block = kv_cache_utils._pool_bytes_per_block(built, groups)
        need = {}
        for window in WINDOWS:
            built.model_config.max_model_len = window
            need[str(window)] = kv_cache_utils._max_memory_usage_bytes_from_groups(built, groups) + null_block
        out[name] = {
            "block_size": block,
            "in_flight": built.max_in_flight_tokens,
            "groups": [len(group.layer_names) for group in groups],
            "need": need,
        }
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fake_cuda

    fake_cuda.install()
    fake_cuda.use(24, (8, 9), "NVIDIA L4", False)
    print("VLLM-KV-COUNT " + json.dumps(counts(Path(sys.argv[1]))))
