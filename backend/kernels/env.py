"""The environment variables that hand a compiled kernel to the engine's processes (standard library only)."""

from __future__ import annotations

KERNEL_ENV = "GEMMA_CHAT_CPU_LINEAR"
"""The compiled bfloat16 linear kernel's path; set only in the optimized engine's environment."""
THREADS_ENV = "GEMMA_CHAT_CPU_LINEAR_THREADS"
"""How many threads the kernel computes on."""
