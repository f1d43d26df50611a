"""The optimized path's bfloat16 linear kernel, inside vLLM's CPU engine processes.

vLLM's CPU build picks a matrix multiply per linear layer when the weights are loaded
(``dispatch_cpu_unquantized_gemm``): oneDNN, or plain ``torch.nn.functional.linear`` where
oneDNN has no bfloat16 kernel for the CPU. Where the engine's environment names a compiled
kernel in ``GEMMA_CHAT_CPU_LINEAR`` (the optimized path sets it; the baseline never
does), layers that got the plain PyTorch fallback get ``backend.kernels.bf16_linear``
instead — the same bits, faster. Anything else vLLM chose is left alone, and so is every
layer when the kernel fails its bit-for-bit check against PyTorch on this machine.
Standard library only until vLLM's module is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log
from backend.compat.wrap import wrap
from backend.kernels.env import KERNEL_ENV

MODULE = "vllm.model_executor.layers.utils"
_PATCHED = "_gemma_chat_cpu_linear"
_state: dict[str, Any] = {"loaded": False, "kernel": None, "layers": 0}


def _kernel(path: str) -> Any:
    if not _state["loaded"]:
        _state["loaded"] = True
        from backend.kernels import bf16_linear

        _state["kernel"] = bf16_linear.load(Path(path))
        if _state["kernel"] is None:
            log("gemma-chat bf16 linear kernel: not used (it does not reproduce PyTorch here)")
    return _state["kernel"]


def is_torch_fallback(cpu_linear: Any) -> bool:
    """Whether vLLM chose its plain ``torch.nn.functional.linear`` path for a layer."""
    code = getattr(cpu_linear, "__code__", None)
    return code is not None and set(code.co_names) == {"torch", "nn", "functional", "linear"}


def plain_weight(layer: Any) -> None:
    """Hold a kernel layer's weight as a plain ``torch.nn.Parameter`` over the same storage.

    vLLM's weight parameters are a subclass with a Python ``__torch_function__`` (for loading);
    the compiled graph hands the weight to the kernel's operator, and PyTorch then calls that
    Python hook on every call (about 10-20 us, measured). Loading is over by the time vLLM
    picks the matrix multiply, and a plain parameter's hook is PyTorch's disabled one. The same
    bytes, not a copy: a weight tied to another layer (an embedding) stays shared."""
    import torch

    weight = layer.weight
    if type(weight) is not torch.nn.Parameter:
        layer.weight = torch.nn.Parameter(weight.data, requires_grad=False)


def _replace(layer: Any, path: str) -> None:
    if not is_torch_fallback(getattr(layer, "cpu_linear", None)):
        return
    from backend.kernels.bf16_linear import eligible, handles

    bias = getattr(layer, "bias", None)
    if not eligible(layer.weight, bias):
        return  # loading the kernel waits for a layer it could compute
    kernel = _kernel(path)
    if kernel is None or not handles(layer.weight, bias):
        return
    plain_weight(layer)
    layer.cpu_linear = lambda x, weight, bias: kernel(x, weight)
    _state["layers"] += 1
    if _state["layers"] == 1:
        log(f"gemma-chat bf16 linear kernel: in use ({path})")


def _with_kernel(path: str) -> Any:
    def make(original: Any) -> Any:
        def dispatch_cpu_unquantized_gemm(layer: Any, remove_weight: bool) -> None:
            original(layer, remove_weight)
            _replace(layer, path)

        return dispatch_cpu_unquantized_gemm

    return make


def patch(module: Any) -> None:
    path = os.environ.get(KERNEL_ENV)
    if path:
        wrap(
            module,
            {"dispatch_cpu_unquantized_gemm": _with_kernel(path)},
            mark=_PATCHED,
            label="bf16 linear kernel",
        )


def layers_replaced() -> int:
    """How many layers in this process compute with the kernel (for tests and logs)."""
    return int(_state["layers"])


def install_import_hook() -> None:
    after_import(MODULE, patch)
