"""The CPU classes gemma-chat's machines come in, and what the optimized path adds on each.

The class is read from the CPU's flags (``backend.provenance.cpu_flags``); ``paths`` prints
the table with this machine's row marked, so a user (or a figure's reader) knows which parts of
the optimized path a measurement on this machine could show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuClass:
    name: str
    adds: str


EVERY_CPU = (
    "the model worker inside the engine-core process (vLLM's worker OpenMP threads and binding), "
    "no spinning between steps, one worker call per step; "
    "speculation decided at its first start by measuring 0–4 drafts on the engine itself (a model "
    "too slow for that, such as E2B on a few cores: predicted from measured step costs and "
    "acceptance, then checked against your first replies), kept only where it pays "
    "(`paths --measure` measures fully, drafts by load included), and verified "
    "row-exactly: a linear layer whose matmul rounds differently with more rows (checked at load) "
    "computes a verifying step's rows one at a time, so the tokens are the baseline's"
)
"""What the optimized path adds on any CPU."""

AVX2 = CpuClass(
    "AVX2 without native bfloat16 (e.g. AMD EPYC Zen 2/3)",
    "gemma-chat's bfloat16 linear kernel on bf16 checkpoints (bit-identical to PyTorch's AVX2 path, "
    f"its threads on every core); {EVERY_CPU}",
)
_NATIVE_ADDS = (
    "gemma-chat's one-pass kernel (AVX512-BF16) on each large bfloat16 layer it is proven at load "
    "to reproduce bit for bit (a plain step reads the weights faster; a verifying step computes "
    "each row in the one-row order in one pass: about one plain step, not 1 + k); a layer it "
    "cannot prove keeps vLLM's matmul and verifies row by row, named in the engine's log; "
    f"{EVERY_CPU}; every core for the model only with `cpu_all_cores = true` (it changed greedy "
    "tokens: opt-in)"
)
NATIVE_BF16 = CpuClass(
    "AVX512-BF16 without AMX (e.g. AMD EPYC Zen 4 and later): vLLM multiplies through oneDNN",
    _NATIVE_ADDS,
)
AMX = CpuClass(
    "AMX (e.g. Intel Xeon Sapphire Rapids and later): vLLM's AMX kernels and oneDNN",
    _NATIVE_ADDS,
)
OTHER = CpuClass("other x86 or Arm", EVERY_CPU)
CLASSES = (AVX2, NATIVE_BF16, AMX, OTHER)


def cpu_class(flags: Sequence[str]) -> CpuClass:
    if "amx_bf16" in flags or "amx_tile" in flags:
        return AMX
    if "avx512_bf16" in flags:
        return NATIVE_BF16
    if "avx2" in flags:
        return AVX2
    return OTHER


def describe_classes(flags: Sequence[str]) -> list[str]:
    """One line per class, this machine's marked."""
    here = cpu_class(flags)
    return [f"  {'*' if c == here else ' '} {c.name}: {c.adds}" for c in CLASSES]
