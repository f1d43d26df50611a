"""Several rows of a bfloat16 linear layer in one pass over its weights, each row with the bits a
one-row call gives it: row-exact verification at the cost of about one plain step.

A verifying step computes 1 + k rows through every linear layer. Where vLLM's matmul rounds a
several-row call differently from a one-row call (oneDNN's bfloat16 brgemm on AVX512-BF16 sums
K in blocks of 512 for one row and 1,024 for more, measured), row-exact verification must give
each row the one-row bits. Computing each row alone costs 1 + k plain steps; this kernel
(``row_exact_bf16.c``) computes every row in the one-row order (float32 VDPBF16PS sums, K in
blocks of ``kblock``, blocks added in order) while reading each weight once.

Nothing here assumes oneDNN's order: ``prove_layer`` compares the kernel with the layer's own
matmul bit for bit (random inputs, at least 2^17 outputs per row count) for each candidate block:
calls of 1..9 rows against its one-row call (what verification needs), and calls of 2..64 rows
against its calls of as many rows (what a batch or a prefill gets from the baseline). A layer
proven both ways computes every call through the kernel (oneDNN's packed copy is freed: no more
memory, and a plain step reads the weights faster, measured); one proven only for one row keeps
its matmul and a packed copy for verifying steps; one without a proof is computed row by row.
Loaded only inside the optimized engine's processes, and only on a CPU with AVX512-BF16
(``usable_here``).
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

AVX512_BF16_FLAGS = ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16")
KBLOCKS = (512, 1024, 256, 2048, 128, 64, 32)
"""Candidate K blocks, the likeliest first (oneDNN's one-row block on AVX512-BF16 was 512)."""
OUTPUTS_PER_CHECK = 1 << 17
"""Outputs compared per row count: an order that differs changes about 1 output in 4,000
(measured), so 2^17 outputs miss it with probability below e^-30."""
PROOF_ROWS = 9
"""Row counts proved: 1..9 covers one request verifying up to 8 drafts, and every tail of the
kernel's groups of 6 rows."""

Matmul = Callable[[torch.Tensor], torch.Tensor]

_LIBRARY = torch.library.Library("gemma_chat", "FRAGMENT")
_LIBRARY.define("rx_pack(Tensor weight) -> Tensor")
_LIBRARY.define("rx_rows(Tensor x, Tensor packed, int n, int kblock) -> Tensor")
_loaded: list[str] = []


@torch.library.register_fake("gemma_chat::rx_pack")
def _(weight: torch.Tensor) -> torch.Tensor:
    blocks = -(-weight.shape[0] // 64) * 4
    return weight.new_empty((blocks * weight.shape[1] * 16,))


@torch.library.register_fake("gemma_chat::rx_rows")
def _(x: torch.Tensor, packed: torch.Tensor, n: int, kblock: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], n))


def cpu_flags() -> set[str]:
    """This CPU's feature flags (Linux's /proc/cpuinfo; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def usable_here() -> str | None:
    """None where the kernel can run (x86-64 with AVX512-BF16), else why not; an AVX2 class forced
    by ``GEMMA_CHAT_FORCE_LINEAR`` has none."""
    from backend.kernels.env import AVX2_FORCES, FORCE_ENV, forced

    if forced() in AVX2_FORCES:
        return f"{FORCE_ENV}={forced()}: an AVX2 CPU has no AVX512-BF16"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the kernel is written for x86-64, this is {platform.machine()}"
    if "avx512_bf16" not in cpu_flags():
        return "this CPU has no AVX512-BF16 (VDPBF16PS)"
    return None


def for_engine() -> tuple[Path | None, str]:
    """The compiled kernel for the optimized engine, or None and the reason not."""
    from backend.kernels.build import KernelUnavailable, compiled_operator

    reason = usable_here()
    if reason is not None:
        return None, reason
    try:
        return compiled_operator("row_exact_bf16", AVX512_BF16_FLAGS), "compiled"
    except (KernelUnavailable, OSError) as error:  # OSError: a cache folder it cannot write
        return None, str(error)


def load(path: Path) -> bool:
    """Load the compiled operators (once per process); False where this CPU cannot run them."""
    if usable_here() is not None:
        return False
    if not _loaded:
        torch.ops.load_library(str(path))
        _loaded.append(str(path))
    return True


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [N, K] (bfloat16, K even) in the kernel's layout (a copy; N rounded up to 64)."""
    return torch.ops.gemma_chat.rx_pack(weight.detach())


def rows(x: torch.Tensor, packed: torch.Tensor, n: int, kblock: int) -> torch.Tensor:
    """x[..., K] through packed weights of ``n`` outputs, each row in the one-row order."""
    return torch.ops.gemma_chat.rx_rows(x, packed, n, kblock)


def eligible(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether the kernel can compute this layer at all."""
    from backend.kernels.bf16_linear import plain_bf16_matrix

    return plain_bf16_matrix(weight, bias) and weight.numel() > 0 and weight.shape[1] % 2 == 0


MANY_ROWS = (2, 3, 4, 5, 6, 7, 8, 9, 17, 64)
"""Row counts of the several-row proof: a batch of decodes, a verifying request, a prefill chunk
(oneDNN kept one block for 2..2,048 rows on every E2B shape, measured; the proof does not rely
on it beyond these counts)."""


@dataclass(frozen=True)
class Proof:
    """The K blocks with which the kernel reproduces a layer's own matmul, bit for bit."""

    one_row: int | None
    """reproducing its one-row call (a plain decode step's), or None"""
    many_rows: int | None
    """reproducing its several-row calls (``MANY_ROWS`` rows), or None"""


def prove_layer(linear: Matmul, packed: torch.Tensor, k: int, n: int, dtype: torch.dtype) -> Proof:
    """Compare the kernel with ``linear`` (the layer's matmul of rows x[m, k]) on random rows: at
    least 2^17 outputs per row count, calls of 1..9 rows against one-row calls, and calls of
    ``MANY_ROWS`` rows against the layer's own calls of as many rows."""
    count = max(max(MANY_ROWS), -(-OUTPUTS_PER_CHECK // n))
    x = torch.randn(count, k, generator=torch.Generator().manual_seed(0)).to(dtype)
    alone = torch.cat([linear(x[i : i + 1]) for i in range(count)])
    one = _first_block(x, packed, n, range(1, PROOF_ROWS + 1), lambda m: alone)
    many = _first_block(x, packed, n, MANY_ROWS, lambda m: _in_calls_of(m, x, linear))
    return Proof(one, many)


def _first_block(
    x: torch.Tensor,
    packed: torch.Tensor,
    n: int,
    counts: Sequence[int],
    expected: Callable[[int], torch.Tensor],
) -> int | None:
    wanted = {m: expected(m) for m in counts}
    for kblock in KBLOCKS:
        kernel = functools.partial(rows, packed=packed, n=n, kblock=kblock)
        if all(torch.equal(_in_calls_of(m, x, kernel), wanted[m]) for m in counts):
            return kblock
    return None


def _in_calls_of(m: int, x: torch.Tensor, linear: Matmul) -> torch.Tensor:
    """``x``'s rows through ``linear`` in calls of ``m`` rows; the last call takes what is left,
    and with ``m`` > 1 never one row alone (a one-row call is another order)."""
    starts = list(range(0, x.shape[0], m))
    if m > 1 and x.shape[0] % m == 1 and len(starts) > 1:
        starts.pop()
    ends = [*starts[1:], x.shape[0]]
    return torch.cat([linear(x[a:b]) for a, b in zip(starts, ends, strict=True)])
