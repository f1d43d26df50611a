"""The environment variables that hand a compiled kernel to the engine's processes (standard library and
``backend.config`` only)."""

from __future__ import annotations

from backend.config import switch_rules
from backend.config.switch_rules import LINEAR_FORCES, forced_linear

KERNEL_ENV = switch_rules.CPU_LINEAR
"""The compiled bfloat16 linear kernel's path; set only in the optimized engine's environment."""
THREADS_ENV = switch_rules.LINEAR_THREADS
"""How many threads the kernel computes on."""
FORCE_ENV = switch_rules.FORCE_LINEAR
"""Forces the bfloat16 linear decision whatever the CPU (tests, and users checking another CPU
class's path): ``kernel`` (act as an AVX2 CPU without native bfloat16 and use the kernel),
``torch`` (the same CPU, without the kernel) or ``onednn`` (no kernel, as on a native-bfloat16 CPU)."""
FORCE_VALUES = LINEAR_FORCES
AVX2_FORCES = ("kernel", "torch")
"""The forced decisions that make every engine compute bfloat16 linears as an AVX2 CPU does."""


def forced() -> str | None:
    """The forced linear decision in this process's environment (None: the machine decides); a
    value outside ``FORCE_VALUES`` is refused (``SwitchError``)."""
    return forced_linear() or None
