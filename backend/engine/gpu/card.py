"""The GPU an engine would run on: its name, memory and compute capability — this machine's, read
through vLLM's own platform, or one described on the command line (``paths --gpu-memory``).

Refusals that hold before any engine starts live here too: a card below compute capability 8.0
(no bfloat16, where Gemma 4 is trained; vLLM would silently run float16) and float16 for Gemma 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.errors import GemmaChatError

GIB = 2**30
MIN_CAPABILITY = (8, 0)
"""bfloat16 needs Ampere (8.0) or newer; Gemma 4's weights and activations are bfloat16."""
KNOWN_CARDS = {
    (7, 0): "a Volta card such as the V100",
    (7, 5): "a Turing card such as the T4 or RTX 20xx",
    (8, 0): "an Ampere data-centre card such as the A100",
    (8, 6): "an Ampere card such as the A10, A40 or RTX 30xx",
    (8, 9): "an Ada card such as the L4, L40S or RTX 40xx",
    (9, 0): "a Hopper card such as the H100 or H200",
    (10, 0): "a Blackwell data-centre card such as the B200",
    (12, 0): "a Blackwell card such as the RTX 50xx",
}
"""What a compute capability means to a reader, for a GPU that is only described."""


class GpuRefused(GemmaChatError):
    """The GPU (or the dtype asked of it) cannot run the model."""


@dataclass(frozen=True)
class GpuFacts:
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int]
    described: bool = False
    """True for a GPU given on the command line (not this machine's)."""

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    @property
    def free_gib(self) -> float:
        return self.free_bytes / GIB

    @property
    def capability_text(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"

    def label(self) -> str:
        where = "described, not this machine's" if self.described else "this machine's"
        return (
            f"{self.name} ({self.total_gib:.0f} GiB, {self.free_gib:.1f} GiB free, compute capability "
            f"{self.capability_text}; {where})"
        )


def parse_capability(text: str) -> tuple[int, int]:
    """``"8.9"`` → ``(8, 9)``; a clear error for anything else."""
    major, dot, minor = text.strip().partition(".")
    if not (major.isdigit() and (not dot or minor.isdigit())):
        raise GpuRefused(
            f"--gpu-capability {text!r} is not a compute capability.",
            "Give it as MAJOR.MINOR, e.g. 8.9 for an L4 or RTX 4090 (`nvidia-smi --query-gpu=compute_cap "
            "--format=csv` prints it).",
        )
    return int(major), int(minor or 0)


def described_gpu(memory_gib: float, capability: tuple[int, int] = (8, 9)) -> GpuFacts:
    """A GPU that is not here: all of its memory counted as free (nothing else runs on it)."""
    if not 1 <= memory_gib <= 4096:
        raise GpuRefused(f"--gpu-memory {memory_gib:g} is not a GPU's memory in GiB.", "Give 8 to 192.")
    kind = KNOWN_CARDS.get(capability, "a GPU")
    total = int(memory_gib * GIB)
    return GpuFacts(f"{kind}, {memory_gib:g} GiB", total, total, capability, described=True)


def detect_gpu(device: int = 0) -> GpuFacts | None:
    """This machine's GPU as vLLM's platform sees it (None without the CUDA build or a GPU)."""
    from backend.engine.platform import on_gpu

    if not on_gpu():  # on the CPU build: known without importing torch
        return None
    from vllm.platforms import current_platform

    capability = current_platform.get_device_capability(device)
    total = int(current_platform.get_device_total_memory(device))
    free = _free_bytes(device, total)
    major, minor = (capability.major, capability.minor) if capability is not None else (0, 0)
    return GpuFacts(str(current_platform.get_device_name(device)), total, free, (major, minor))


def _free_bytes(device: int, total: int) -> int:
    """Free memory now (other processes' use subtracted), read through NVML (vLLM's copy of
    pynvml): no CUDA context opens in the app's process — one holds about 0.4 GiB of the card for
    as long as the app runs, which a swap between engines would have to leave room for."""
    try:
        from vllm.platforms import current_platform
        from vllm.third_party import pynvml

        pynvml.nvmlInit()
        try:
            physical = current_platform.device_id_to_physical_device_id(device)
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(physical)).free)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML (a driver that does not answer): plan on all of it; vLLM's check decides
        return total


def check_gpu(gpu: GpuFacts) -> None:
    """Refuse a card below compute capability 8.0, naming it."""
    if gpu.capability < MIN_CAPABILITY:
        raise GpuRefused(
            f"{gpu.name} has compute capability {gpu.capability_text}: it has no bfloat16, so vLLM would "
            "run Gemma 4 in float16, where its activations overflow (Gemma 4 is trained in bfloat16). "
            "gemma-chat needs compute capability 8.0 or newer (A100, A10, L4, RTX 30xx and later).",
            "Run on a newer GPU, on the CPU (GEMMA_CHAT_ENGINE_BUILD=cpu), or against a vLLM server "
            "on one (--server URL).",
        )


def check_dtype(dtype: str, model_type: str, gpu: GpuFacts | None) -> None:
    """Refuse float16 for Gemma 4 (vLLM refuses it for Gemma 2 and 3, not yet for 4)."""
    if dtype == "float16" and model_type.startswith("gemma4"):
        where = f" on {gpu.name}" if gpu is not None else ""
        raise GpuRefused(
            f"dtype = float16{where}: Gemma 4 is trained in bfloat16 and overflows in float16 "
            "(vLLM refuses float16 for Gemma 2 and 3 for the same reason).",
            "Use dtype = auto (bfloat16) or float32; on a GPU below compute capability 8.0, use the CPU "
            "or a newer card.",
        )
