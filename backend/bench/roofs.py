"""This machine's ceilings (matmul FLOP/s, memory bandwidth) and the token rates they allow.

A decode step multiplies every weight once (``ModelCosts.flops_per_token``) and, at one
request, reads every weight from memory once (``ModelCosts.weight_bytes_per_token``). So
``compute_roof_tokens_per_s`` bounds aggregate throughput at any batch size, and
``bandwidth_roof_tokens_per_s`` bounds a single request's decode rate (a batch of B shares one
weight read, so its bound is B times that). Attention over the KV cache is extra on top.

Threads: vLLM's CPU build runs the model on all cores but one by default (on a 2-vCPU machine,
one thread), so callers pass the thread count the engine will really use. Measurements change
``torch.set_num_threads`` only for their duration.

On a GPU the roofs are measured in a child process (``measure_roofs_apart``) that has exited before
any engine starts: measuring opens a CUDA context and fills PyTorch's caching allocator, memory
that would stay on the card for the app's lifetime and that the memory plan gave the engines. The
app's own process opens no CUDA context (it reads the card through NVML).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from backend.bench.model_costs import ModelCosts, model_costs

__all__ = [
    "ModelCosts",
    "Roofs",
    "bandwidth_roof_tokens_per_s",
    "compute_roof_tokens_per_s",
    "decode_roof_tokens_per_s",
    "measure_matmul_flops",
    "measure_memory_bandwidth",
    "measure_roofs",
    "measure_roofs_apart",
    "measure_roofs_here",
    "model_costs",
]


@dataclass(frozen=True)
class Roofs:
    flops_per_s: float
    bytes_per_s: float
    threads: int
    dtype: str
    device: str
    matmul_dtype: str = ""
    """The dtype whose matmul rate sets the compute roof (float32 where this CPU computes
    bfloat16 products in float32 and PyTorch's own bfloat16 path is slower than that)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with ``threads`` intra-op threads (None: unchanged); yield the count in use."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def measure_matmul_flops(
    dtype: str = "bfloat16",
    size: int = 2048,
    threads: int | None = None,
    seconds: float = 1.5,
    device: str = "cpu",
) -> float:
    """FLOP/s of a ``size`` x ``size`` product (2 * size**3 FLOPs), warm-up excluded.

    It goes through ``torch.nn.functional.linear`` (x @ W.T), the kernel a model's linear layers
    use: on CPUs without native bfloat16 its oneDNN path is over ten times faster in bfloat16 than
    ``torch.matmul``'s fallback, so a plain matmul would understate what the model can reach.
    """
    import torch
    import torch.nn.functional as F

    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(size, size, generator=generator, device=device).to(getattr(torch, dtype))
    weight = torch.randn(size, size, generator=generator, device=device).to(getattr(torch, dtype))
    with torch_threads(threads):
        iterations, elapsed = _timed_loop(lambda: F.linear(x, weight), seconds, device)
    return 2.0 * size**3 * iterations / elapsed


def measure_memory_bandwidth(
    threads: int | None = None, mib: int = 512, seconds: float = 1.5, device: str = "cpu"
) -> float:
    """Bytes/s of copying a ``mib`` MiB tensor into another, counting the bytes read and written."""
    import torch

    source = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=device)
    target = torch.empty_like(source)
    with torch_threads(threads):
        iterations, elapsed = _timed_loop(lambda: target.copy_(source), seconds, device)
    return 2.0 * source.numel() * source.element_size() * iterations / elapsed


def measure_roofs(
    dtype: str = "bfloat16", threads: int | None = None, device: str = "cpu", seconds: float = 1.5
) -> Roofs:
    """Both ceilings with the same thread count (None: torch's current count): on a CPU in this
    process, on a GPU in a child process that exits before this returns (``measure_roofs_apart``)."""
    if device == "cpu":
        return measure_roofs_here(dtype, threads, device, seconds)
    return measure_roofs_apart(dtype, threads, device, seconds)


def measure_roofs_apart(dtype: str, threads: int | None, device: str, seconds: float) -> Roofs:
    """``measure_roofs_here`` in a fresh child process (spawned: a forked one would inherit this
    process's state), waited for until it has exited — so its CUDA context and cached blocks are
    gone from the card before the engines start and the plan reads the free memory."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_measured_in_child, dtype, threads, device, seconds).result()


def _measured_in_child(dtype: str, threads: int | None, device: str, seconds: float) -> Roofs:
    """The child's entry point (pickled by name: the child imports this module afresh)."""
    return measure_roofs_here(dtype, threads, device, seconds)


def measure_roofs_here(
    dtype: str = "bfloat16", threads: int | None = None, device: str = "cpu", seconds: float = 1.5
) -> Roofs:
    """Both ceilings, measured in this process (on a GPU: opens a CUDA context here).

    On a CPU the compute roof is the faster of the model dtype's matmul and float32's: a CPU
    without native bfloat16 multiplies bfloat16 in float32, so what its float32 units do is
    the ceiling, however slow PyTorch's own bfloat16 loop is (gemma-chat's kernel beats it)."""
    with torch_threads(threads) as used:
        flops = measure_matmul_flops(dtype, threads=used, seconds=seconds, device=device)
        matmul_dtype = dtype
        if device == "cpu" and dtype in ("bfloat16", "float16"):
            wide = measure_matmul_flops("float32", threads=used, seconds=seconds, device=device)
            if wide > flops:
                flops, matmul_dtype = wide, "float32"
        bandwidth = measure_memory_bandwidth(threads=used, seconds=seconds, device=device)
    return Roofs(
        flops_per_s=flops,
        bytes_per_s=bandwidth,
        threads=used,
        dtype=dtype,
        device=device,
        matmul_dtype=matmul_dtype,
    )


def compute_roof_tokens_per_s(costs: ModelCosts, roofs: Roofs) -> float:
    """Tokens/s if the matmuls ran at the measured FLOP/s (any batch size)."""
    return roofs.flops_per_s / costs.flops_per_token


def bandwidth_roof_tokens_per_s(costs: ModelCosts, roofs: Roofs) -> float:
    """Decode steps/s if each step only had to read the weights once (one request's tokens/s)."""
    return roofs.bytes_per_s / costs.weight_bytes_per_token


def decode_roof_tokens_per_s(costs: ModelCosts, roofs: Roofs, batch_size: int) -> float:
    """Aggregate decode tokens/s at ``batch_size`` requests: the lower of the two roofs."""
    return min(
        compute_roof_tokens_per_s(costs, roofs), batch_size * bandwidth_roof_tokens_per_s(costs, roofs)
    )


def _timed_loop(step: Callable[[], object], seconds: float, device: str) -> tuple[int, float]:
    """Run ``step`` once as warm-up, then repeatedly for about ``seconds``: (iterations, elapsed)."""
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    step()
    sync()
    iterations, start = 0, time.perf_counter()
    while True:
        step()
        iterations += 1
        if iterations % 32 == 0 or not device.startswith("cuda"):
            sync()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return iterations, elapsed
