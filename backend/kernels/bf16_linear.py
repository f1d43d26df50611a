"""The bfloat16 linear kernel as a PyTorch operator, used only where it reproduces PyTorch.

``usable_here()`` says whether this machine computes bfloat16 linears the way the kernel
reproduces (ATen's AVX2 dot-product loop: no oneDNN bfloat16, CPU capability AVX2).
``load(path)`` loads a compiled kernel and checks it against ``torch.nn.functional.linear``
bit for bit on shapes that exercise every code path; it returns None when any bit differs,
so the engine keeps PyTorch's own path rather than risk a different token.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from backend.config import switch_rules
from backend.config.switch_rules import linear_min_weights, linear_threads
from backend.kernels.env import FORCE_ENV, forced

Linear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

CHECK_SHAPES = ((1, 768, 96), (3, 768, 50), (8, 64, 33), (37, 784, 70), (5, 3072, 12))
"""(rows, K, N): one row (the streaming path), tiles with ragged rows and columns, and
K with and without a 16-element tail after its 64-element chunks."""

_lib: ctypes.CDLL | None = None


def usable_here() -> str | None:
    """None where the kernel reproduces PyTorch's bfloat16 linear, else the reason it does not.

    ``GEMMA_CHAT_FORCE_LINEAR`` decides instead of the CPU: ``kernel`` makes the engines compute
    as an AVX2 CPU does (``backend.compat.linear.forced_linear``), where the kernel applies."""
    force = forced()
    if force == "kernel":
        return None
    if force is not None:
        return f"{FORCE_ENV}={force}: the kernel is not used"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        return f"PyTorch uses its {capability} kernels here (the kernel reproduces the AVX2 ones)"
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "this CPU has native bfloat16 (oneDNN computes bfloat16 linears here)"
    return None


_LIBRARY = torch.library.Library("gemma_chat", "DEF")
_LIBRARY.define("bf16_linear(Tensor x, Tensor weight) -> Tensor")
# torch.library.Library rather than torch.library.custom_op: the latter's Python wrapper costs
# about 60 us a call, more than a decode step's small layers take in all. Its CPU implementation
# is registered by ``load``: natively by the compiled library where it carries the operator
# (``bf16_linear_op.cpp``, a few us a call), else the Python one below (about 30 us).
_implementation: str | None = None


def _bf16_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x[..., K] @ weight[N, K]^T in bfloat16, bit-identical to torch.nn.functional.linear."""
    if _lib is None:
        raise RuntimeError("gemma_chat::bf16_linear called before the kernel was loaded")
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        return torch.nn.functional.linear(x, weight)  # PyTorch's own answer (or its error)
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    weight = weight.contiguous()
    out = torch.empty((rows.shape[0], weight.shape[0]), dtype=torch.bfloat16)
    status = _lib.gc_linear_bf16(
        rows.data_ptr(), weight.data_ptr(), out.data_ptr(), rows.shape[0], weight.shape[0], weight.shape[1]
    )
    if status != 0:
        raise MemoryError("bf16_linear: no memory for its float32 scratch")
    return out.reshape(*x.shape[:-1], weight.shape[0])


def implementation() -> str | None:
    """How the operator is implemented in this process: "native", "python", or None before ``load``."""
    return _implementation


def _register(lib: ctypes.CDLL) -> None:
    """Record the native registration, or register the Python one (once per process: a second
    library loaded here computes through the first one's registration)."""
    global _implementation
    if _implementation is not None:
        return
    if hasattr(lib, "gc_registers_operator"):
        _implementation = "native"
    else:
        _LIBRARY.impl("bf16_linear", _bf16_linear, "CPU")
        _implementation = "python"


@torch.library.register_fake("gemma_chat::bf16_linear")
def _(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


bf16_linear = torch.ops.gemma_chat.bf16_linear.default


MIN_WEIGHTS = {"native": 1 << 13, "python": 1 << 17}
"""Smaller layers keep PyTorch's path: one of their rows takes PyTorch about as long as the
operator's call costs. Through the Python implementation that was 256 x 256 in 27 us against
31 us; the native operator beat PyTorch on every layer shape of the demo model down to 32 x 256
(one row 3.9 against 4.7 us, four rows 4.8 against 7.8 us)."""


MIN_WEIGHTS_ENV = switch_rules.LINEAR_MIN_WEIGHTS
"""Overrides ``MIN_WEIGHTS`` (tests use it to put a tiny checkpoint's layers through the kernel)."""


def plain_bf16_matrix(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """A loaded 2-D bfloat16 weight on the CPU, without a bias: what gemma-chat's kernels take."""
    return (
        bias is None
        and weight.dtype == torch.bfloat16
        and weight.dim() == 2
        and weight.device.type == "cpu"
        and not weight.is_meta
    )


def eligible(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether the kernel can compute this layer at all, whatever its size."""
    return plain_bf16_matrix(weight, bias) and weight.shape[1] % 16 == 0


def handles(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether the loaded kernel computes this layer (others keep PyTorch's path): the smallest
    layer worth its call depends on how the operator is implemented."""
    least = MIN_WEIGHTS[implementation() or "python"]
    size = weight.shape[0] * weight.shape[1] if weight.dim() == 2 else 0
    return eligible(weight, bias) and size >= linear_min_weights(least)


def reproduces_torch() -> bool:
    generator = torch.Generator().manual_seed(0)
    for rows, k, n in CHECK_SHAPES:
        x = (torch.randn(rows, k, generator=generator) * 3).to(torch.bfloat16)
        w = torch.randn(n, k, generator=generator).to(torch.bfloat16)
        expected = torch.nn.functional.linear(x, w)
        if not torch.equal(bf16_linear(x, w).view(torch.int16), expected.view(torch.int16)):
            return False
    return True


def _start_threads(lib: ctypes.CDLL, count: int) -> int:
    """This thread plus helpers pinned to the machine's other cores, ``count`` in all."""
    here = min(os.sched_getaffinity(0))
    cpus = [here, *(cpu for cpu in range(os.cpu_count() or 1) if cpu != here)][: max(1, count)]
    return int(lib.gc_set_threads(len(cpus), (ctypes.c_int * len(cpus))(*cpus)))


@dataclass(frozen=True)
class ThreadStats:
    """What the kernel's threads did in this process so far."""

    shared: int
    """products whose column blocks this thread and its helpers claimed between them"""
    alone: int
    """products this thread computed alone: too small to share, or while helpers were held off"""
    helper_blocks: int
    """column blocks the helpers computed"""
    held_off: int
    """times a helper that lost its core mid-block held a product up, so the next products
    (20 ms, doubling while it recurs, up to 0.64 s) ran on this thread alone"""


def stats() -> ThreadStats:
    if _lib is None:
        raise RuntimeError("bf16_linear.stats() before the kernel was loaded")
    out = (ctypes.c_longlong * 4)()
    _lib.gc_stats(out)
    return ThreadStats(*out)


def load(path: Path, threads: int | None = None) -> Linear | None:
    """The operator backed by the compiled kernel at ``path``, or None unless it matches PyTorch.

    ``threads`` (default: ``GEMMA_CHAT_CPU_LINEAR_THREADS``, else 1) is fixed at the first load."""
    global _lib
    if usable_here() is not None:
        return None
    lib = ctypes.CDLL(str(path))
    lib.gc_linear_bf16.restype = ctypes.c_int
    lib.gc_linear_bf16.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
    lib.gc_set_threads.restype = ctypes.c_int
    lib.gc_stats.restype = None
    _start_threads(lib, threads if threads is not None else linear_threads())
    _lib = lib
    _register(lib)
    if not reproduces_torch():
        _lib = None
        return None
    return bf16_linear


def for_engine() -> tuple[Path | None, str]:
    """The compiled kernel an engine on this machine should use, or None and the reason not:
    with its native operator where a C++ compiler and PyTorch's headers allow, else alone."""
    from backend.kernels.build import KernelUnavailable, compiled, compiled_operator

    reason = usable_here()
    if reason is not None:
        return None, reason
    try:
        return compiled_operator("bf16_linear"), "compiled with its native operator"
    except (KernelUnavailable, OSError) as native_error:
        try:
            return compiled("bf16_linear"), f"compiled; its native operator not built: {native_error}"
        except (KernelUnavailable, OSError) as error:  # OSError: a cache folder it cannot write
            return None, str(error)
