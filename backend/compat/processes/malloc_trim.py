"""A CPU engine gives the memory its start freed back to the system (glibc's ``malloc_trim``).

The problem: loading a checkpoint on vLLM's CPU build allocates every weight, then replaces most
with a packed copy (oneDNN's layout) and frees the original; the warm-up's dummy passes allocate
activations for a whole batch of tokens and free them. Weights under glibc's mmap threshold (which
grows to 32 MB as large blocks are freed: a Gemma 4 E2B layer's projections are 6-18 MB) come from
the heap, and freed heap memory that is not at its top stays resident: measured on an E2B-shaped
checkpoint, the engine held about 1 GiB after loading beyond its weights and imports.

The fix: after each start stage of the model runner (the model loaded, the warm-up, the KV cache
allocated), and after a step that computed ``TRIM_TOKENS`` tokens or more (a prompt's prefill: its
activations), the engine process calls ``malloc_trim(0)``, which returns every free page of every
arena to the system (a few milliseconds, beside a step of seconds). Nothing that is in use moves;
no value changes. Both paths (a memory fix, like
``embedding_pack``); a C library without ``malloc_trim`` (musl) is left alone.
``GEMMA_CHAT_NO_MALLOC_TRIM=1`` leaves the heap as it is (to measure what the trim returns).
"""

from __future__ import annotations

import ctypes
import functools
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import, wrap_own_methods
from backend.config import switch_rules
from backend.config.switch_rules import on

RUNNERS = {
    "vllm.v1.worker.gpu_model_runner": "GPUModelRunner",
    "vllm.v1.worker.cpu_model_runner": "CPUModelRunner",
}
STAGES = ("load_model", "warming_up_model", "profile_run", "initialize_kv_cache")
_PATCHED = "_gemma_chat_malloc_trim"
OFF_ENV = switch_rules.NO_MALLOC_TRIM
TRIM_TOKENS = 256


def trim() -> bool:
    """Return the C heap's free pages to the system; False where the C library cannot."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def _trimmed(method: Any) -> Any:
    @functools.wraps(method)
    def trimmed(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            from vllm.platforms import current_platform

            if current_platform.is_cpu():
                trim()

    return trimmed


def patch_runner(module: ModuleType) -> None:
    if getattr(module, _PATCHED, False) or on(OFF_ENV):
        return
    runner = getattr(module, RUNNERS[module.__name__])
    wrap_own_methods(runner, STAGES, lambda _name, method: _trimmed(method))
    wrap_own_methods(runner, ("execute_model",), lambda _name, method: _trimmed_after_prefill(method))
    setattr(module, _PATCHED, True)


def _trimmed_after_prefill(method: Any) -> Any:
    @functools.wraps(method)
    def execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, scheduler_output, *args, **kwargs)
        finally:
            if getattr(scheduler_output, "total_num_scheduled_tokens", 0) >= TRIM_TOKENS:
                from vllm.platforms import current_platform

                if current_platform.is_cpu():
                    trim()

    return execute_model


def install_import_hook() -> None:
    for name in RUNNERS:
        after_import(name, patch_runner)
