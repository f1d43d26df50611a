"""The GPU memory plan, made before any engine starts: how the two paths share one GPU.

From each path's footprint (``footprint``), the GPU's total and free memory and the setting
``gpu_memory_utilization`` (the most of the card gemma-chat may take):

Every share must pass vLLM's own check at each start (``vllm.v1.worker.utils.request_memory``):
share × total at most the memory free once the starting worker has opened its CUDA context. So the
shares come from what is free now (other programs' memory is not the plan's), less each start's
own context, less what the engines started before it still hold: the first one's whole share and
context beside it, or a sleeping one's residue.

* ``side-by-side``: both engines fit at once; each gets its footprint plus half the room left, the
  shares adding up to at most the setting;
* ``swap``: one engine fits but not two; the active path's engine gets the whole setting, and F2 /
  compare swap engines (vLLM's sleep mode on CUDA, else stop one and start the other);
* ``refused``: not even one engine fits — the message gives both numbers and what would fit.

Between the last two, a *tight* plan: one engine fits only if its runtime takes less than the
2.5 GiB estimated, down to ``TIGHT_RUNTIME_BYTES`` (a 12 GB card at ``gpu_memory_utilization``
0.92-0.95). The plan then goes ahead, one engine at a time (the idle one is stopped, not put to
sleep: its residue would not fit), and says the risk; vLLM's own check at start decides.

``engine.both_paths = "swap"`` forces swapping (also on the CPU, to test it there);
``"side-by-side"`` forces the other way (vLLM then refuses a second engine that does not fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from backend.engine.gpu.card import GpuFacts, GpuRefused
from backend.engine.model.footprint import GIB, RUNTIME_BYTES, Footprint

Mode = Literal["side-by-side", "swap"]
SLEEP_CONTEXT_BYTES = GIB // 2
"""A sleeping engine's CUDA context, left on the card: an estimate."""
SLEEP_BUFFERS_BYTES = GIB // 2
"""Its buffers outside vLLM's sleep pool (the sampler's, NCCL's, the allocator's metadata): an
estimate. Its CUDA graphs go to host memory with the weights (``sleep_mode_offload_cudagraph``)."""
SLEEP_RESIDUE_BYTES = SLEEP_CONTEXT_BYTES + SLEEP_BUFFERS_BYTES
CONTEXT_BYTES = GIB // 2
"""A starting worker's CUDA context (with NCCL's buffers), used before vLLM reads the free memory it
checks the share against: an estimate, as ``SLEEP_CONTEXT_BYTES``."""
HOST_MARGIN_BYTES = 6 * GIB
"""Host memory the app, the active engine's processes and the system need beside a sleeping
engine's weights (the engine-core process alone holds ~3 GiB): an estimate."""
MAX_UTILIZATION = 0.95
TIGHT_RUNTIME_BYTES = int(1.25 * GIB)
TIGHT_GIB = TIGHT_RUNTIME_BYTES / GIB
RUNTIME_GIB = RUNTIME_BYTES / GIB
"""The least runtime a tight plan counts on: CUDA context (~0.5 GiB), the sampler's logits for a
full batch (~0.25 GiB at vocab 262144), CUDA graphs (~0.5 GiB). An estimate, not measured."""


@dataclass(frozen=True)
class MemoryPlan:
    gpu: GpuFacts
    setting: float
    budget_bytes: int
    """What gemma-chat may take: the setting's fraction of the card, or less where less is free."""
    footprints: dict[str, Footprint]
    mode: Mode
    shares: dict[str, float]
    """Each path's ``gpu_memory_utilization``."""
    sleep_mode: bool
    """Swapping puts the idle engine to sleep (vLLM's sleep mode) instead of stopping it."""
    forced: bool = False
    notes: tuple[str, ...] = ()
    tight: bool = False
    """One engine fits only with less runtime than estimated (see the module's note)."""
    host_bytes: int | None = None
    """This machine's RAM, where the card is this machine's (None for a described card)."""

    @property
    def slept_bytes(self) -> int:
        return slept_bytes(self.footprints)

    def swap_lines(self) -> list[str]:
        """What swapping by sleep mode leaves where: the card's residue, the host's weights."""
        if self.mode != "swap":
            return []
        if not self.sleep_mode:
            return [
                "swap room: the idle engine is stopped, so nothing of it stays on the card or in host memory"
            ]
        host = (
            f"this machine has {self.host_bytes / GIB:.0f} GiB"
            if self.host_bytes is not None
            else f"the card's host needs at least {(self.slept_bytes + HOST_MARGIN_BYTES) / GIB:.0f} GiB"
        )
        return [
            f"swap room on the card: the sleeping engine keeps about {SLEEP_RESIDUE_BYTES / GIB:.1f} GiB "
            f"(its CUDA context ~{SLEEP_CONTEXT_BYTES / GIB:.1f}, buffers outside vLLM's pool "
            f"~{SLEEP_BUFFERS_BYTES / GIB:.1f}: estimates; its CUDA graphs go to host memory); the app's "
            "own process opens no CUDA context (it reads the card through NVML); the waking engine's "
            "context is in its runtime",
            f"host memory: a sleeping engine holds {self.slept_bytes / GIB:.1f} GiB of weights there, beside "
            f"~{HOST_MARGIN_BYTES / GIB:.0f} GiB for the app and the active engine; {host}",
        ]

    def share(self, path: str) -> float:
        return self.shares.get(path, self.shares["optimized"])

    def shares_text(self) -> str:
        shares = ", ".join(f"{name} {share:g}" for name, share in self.shares.items())
        return (
            f"gpu_memory_utilization {shares} (setting {self.setting:g}, {self.budget_bytes / GIB:.1f} GiB)"
        )

    def lines(self) -> list[str]:
        """The plan, for ``gemma-chat paths``: the card, each path's needs, the mode and shares."""
        out = [
            f"GPU: {self.gpu.label()}",
            f"budget: {self.budget_bytes / GIB:.1f} GiB (gpu_memory_utilization {self.setting:g} of "
            f"{self.gpu.total_gib:.1f} GiB)",
        ]
        for name, footprint in self.footprints.items():
            kind = "measured" if footprint.measured else "partly estimated"
            out.append(f"{name} engine needs {footprint.total_gib:.1f} GiB ({kind}):")
            out += [f"    {line}" for line in footprint.lines()]
        how = "forced by engine.both_paths" if self.forced else "both fit at once"
        if self.mode == "swap":
            how = "forced by engine.both_paths" if self.forced else "one engine fits, two do not"
            swap = "sleep mode (weights to host memory)" if self.sleep_mode else "stop one, start the other"
            out.append(
                f"plan: swap ({how}) — the active path's engine alone on the GPU; F2 and compare (F3) "
                f"swap engines by {swap}; a compare times each path's turn, never the swap"
            )
        else:
            out.append(f"plan: side by side ({how}) — both paths' engines on the GPU at once")
        out += self.swap_lines()
        out.append("shares: " + ", ".join(f"{name} {share:.3f}" for name, share in self.shares.items()))
        out += [f"note: {note}" for note in self.notes]
        return out


def plan_memory(
    gpu: GpuFacts,
    footprints: dict[str, Footprint],
    setting: float,
    both_paths: str = "auto",
    sleep_available: bool = True,
    host_bytes: int | None = None,
) -> MemoryPlan:
    """The plan for ``footprints`` (``baseline``, ``optimized``) on ``gpu``; raises ``GpuRefused``
    when not even one engine fits."""
    notes: list[str] = []
    budget = int(setting * gpu.total_bytes)
    if gpu.free_bytes - CONTEXT_BYTES < budget:
        budget = gpu.free_bytes - CONTEXT_BYTES
        notes.append(
            f"only {gpu.free_gib:.1f} GiB of {gpu.total_gib:.1f} GiB is free (other processes use the "
            f"rest): the plan uses {budget / GIB:.1f} GiB — what is free less the starting engine's "
            "CUDA context — as vLLM refuses a share larger than what is free once its context is open"
        )
    biggest = max(f.total for f in footprints.values())
    tight = biggest > budget
    if tight:
        least = max(tight_need(f) for f in footprints.values())
        if least > budget:
            raise _refusal(gpu, setting, budget, biggest, footprints)
        notes.append(
            f"tight: one engine needs {biggest / GIB:.1f} GiB with the runtime estimated at "
            f"{RUNTIME_GIB:g} GiB, and {budget / GIB:.1f} GiB leaves it "
            f"{(budget - least) / GIB + TIGHT_GIB:.1f}; "
            "vLLM's own check at start decides. If it fails to start, run on the CPU "
            "(GEMMA_CHAT_ENGINE_BUILD=cpu) or against a vLLM server (--server URL); a card that also "
            "drives a display has less free"
        )
    # the second engine starts beside the first one's share and context, and opens its own
    pair_budget = min(budget, gpu.free_bytes - 2 * CONTEXT_BYTES)
    together = sum(f.total for f in footprints.values()) <= pair_budget
    forced = both_paths in ("side-by-side", "swap")
    mode: Mode = (
        "side-by-side" if (both_paths == "side-by-side" or (both_paths == "auto" and together)) else "swap"
    )
    if mode == "side-by-side":
        spare = max(0, pair_budget - sum(f.total for f in footprints.values())) // len(footprints)
        shares = {name: (f.total + spare) / gpu.total_bytes for name, f in footprints.items()}
        if not together:
            notes.append("both engines do not fit at once: the second may fail to start (engine.both_paths)")
            shares = {name: pair_budget / len(footprints) / gpu.total_bytes for name in footprints}
    else:
        share = budget / gpu.total_bytes
        slept = slept_bytes(footprints)
        if (
            sleep_available
            and not tight
            and host_bytes is not None
            and host_bytes < slept + HOST_MARGIN_BYTES
        ):
            sleep_available = False
            notes.append(
                f"this machine's {(host_bytes or 0) / GIB:.0f} GiB of RAM cannot hold a sleeping engine's "
                f"{slept / GIB:.1f} GiB of weights beside the app and the active engine: swapping stops "
                "the idle engine and starts the other (slower than waking it)"
            )
        if sleep_available and not tight:
            # the sleeping engine keeps its residue: the other starts beside it and must pass
            # vLLM's free-memory check with its own context open
            beside = gpu.free_bytes - SLEEP_RESIDUE_BYTES - CONTEXT_BYTES
            if beside < biggest:
                sleep_available = False
                notes.append(
                    f"a sleeping engine's ~{SLEEP_RESIDUE_BYTES / GIB:.1f} GiB would leave the other "
                    f"{beside / GIB:.1f} GiB of the {gpu.free_gib:.1f} GiB free, less than it needs: "
                    "swapping stops the idle engine and starts the other"
                )
            else:
                share = min(share, beside / gpu.total_bytes)
        shares = dict.fromkeys(footprints, share)
    # rounded down: vLLM requests ceil(share × total) and compares it with what is free
    shares = {
        name: math.floor(min(share, MAX_UTILIZATION) * 1000 + 1e-6) / 1000 for name, share in shares.items()
    }
    return MemoryPlan(
        gpu,
        setting,
        budget,
        footprints,
        mode,
        shares,
        mode == "swap" and sleep_available and not tight,
        forced,
        tuple(notes),
        tight,
        host_bytes,
    )


def slept_bytes(footprints: dict[str, Footprint]) -> int:
    """What a sleeping engine holds in host memory: its weights and its drafter's (the larger path)."""
    return max(f.weights.bytes + (f.drafter.bytes if f.drafter else 0) for f in footprints.values())


def tight_need(footprint: Footprint) -> int:
    """What one engine needs with the least runtime a tight plan counts on."""
    return footprint.total - footprint.runtime.bytes + TIGHT_RUNTIME_BYTES


def _refusal(
    gpu: GpuFacts, setting: float, budget: int, need: int, footprints: dict[str, Footprint]
) -> GpuRefused:
    estimated = "" if all(f.measured for f in footprints.values()) else " (partly estimated)"
    card = math.ceil(need / setting / GIB)
    fixes = [f"a GPU with at least {card} GiB at gpu_memory_utilization {setting:g}"]
    least = max(tight_need(f) for f in footprints.values())
    if need / gpu.total_bytes <= MAX_UTILIZATION and gpu.free_bytes >= need:
        fixes.append(f"gpu_memory_utilization = {min(MAX_UTILIZATION, need / gpu.total_bytes + 0.01):.2f}")
    elif least / gpu.total_bytes <= MAX_UTILIZATION and gpu.free_bytes >= least:
        fixes.append(
            f"gpu_memory_utilization = {math.ceil(least / gpu.total_bytes * 100) / 100:.2f} to try it tight "
            f"(the runtime gets {TIGHT_GIB:g} GiB where {RUNTIME_GIB:g} is estimated: it may fail to start)"
        )
    return GpuRefused(
        f"The model needs {need / GIB:.1f} GiB for one engine{estimated}; {gpu.name} gives it "
        f"{budget / GIB:.1f} GiB ({setting:g} of {gpu.total_gib:.1f} GiB"
        f"{', less what other processes use' if gpu.free_bytes < setting * gpu.total_bytes else ''}).",
        "What would fit: " + "; or ".join(fixes) + ". Or run on the CPU (GEMMA_CHAT_ENGINE_BUILD=cpu), "
        "or against a vLLM server (--server URL).",
    )
