"""What this machine gives an engine: a GPU or not, and a context window its memory can hold."""

from __future__ import annotations

from backend.engine import env as vllm_env


def on_gpu() -> bool:
    """True where vLLM runs on CUDA (the CUDA build with a visible GPU)."""
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
