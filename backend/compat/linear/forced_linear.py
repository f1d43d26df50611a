"""An AVX2 CPU's bfloat16 linear layers on any CPU, where ``GEMMA_CHAT_FORCE_LINEAR`` asks.

Which matrix multiply a bfloat16 layer gets depends on the CPU: on an AVX2 CPU without native
bfloat16, vLLM's oneDNN handle fails and the layer falls back to ``torch.nn.functional.linear``,
which ATen computes with its AVX2 dot-product loop (the loop gemma-chat's kernel reproduces); a
CPU with AVX512-BF16 gets oneDNN, one with AMX vLLM's SGL kernel for small layers. So the kernel
path of the optimized engine, and the fallback path of the baseline, ran only on AVX2 machines.

With ``GEMMA_CHAT_FORCE_LINEAR=kernel`` or ``torch`` in the environment (both paths' engines
inherit it), every interpreter of the environment computes bfloat16 linears as an AVX2 CPU does:
ATen runs its AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``, set before torch loads), ATen's own
bfloat16 matmul does not go through oneDNN, and vLLM's per-layer choice refuses oneDNN and SGL
for bfloat16 weights, so such layers take vLLM's own PyTorch fallback — where ``cpu_linear``
then puts the kernel (``kernel``) or not (``torch``). Other dtypes and everything else vLLM
chooses by CPU stay the machine's, alike on both paths. Standard library only until torch or
vLLM's module is imported.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.kernels.env import AVX2_FORCES, forced

MODULE = "vllm.model_executor.layers.utils"
_PATCHED = "_gemma_chat_forced_linear"
CAPABILITY_ENV = "ATEN_CPU_CAPABILITY"


def _is_bf16(weight: Any) -> bool:
    import torch

    return getattr(weight, "dtype", None) == torch.bfloat16


def _no_mkldnn(_torch: ModuleType) -> None:
    """ATen's bfloat16 matmul without oneDNN (as where oneDNN has no bfloat16 kernel)."""
    import torch.backends.mkldnn as mkldnn  # a submodule torch may not have imported yet

    mkldnn.enabled = False


def patch(module: ModuleType) -> None:
    if forced() not in AVX2_FORCES or getattr(module, _PATCHED, False):
        return
    import torch

    _no_mkldnn(torch)
    ops = module.ops
    create_onednn_mm = ops.create_onednn_mm
    check_cpu_sgl_kernel = getattr(module, "check_cpu_sgl_kernel")  # noqa: B009

    def refuse_bf16(weight: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_bf16(weight):
            raise RuntimeError("gemma-chat: bfloat16 through oneDNN refused (GEMMA_CHAT_FORCE_LINEAR)")
        return create_onednn_mm(weight, *args, **kwargs)

    def no_sgl_for_bf16(n: int, k: int, dtype: Any) -> bool:
        return dtype != torch.bfloat16 and bool(check_cpu_sgl_kernel(n, k, dtype))

    ops.create_onednn_mm = refuse_bf16
    setattr(module, "check_cpu_sgl_kernel", no_sgl_for_bf16)  # noqa: B010  (a module typed without it)
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    if forced() in AVX2_FORCES:
        os.environ.setdefault(CAPABILITY_ENV, "avx2")
        after_import("torch", _no_mkldnn)
        after_import(MODULE, patch)
