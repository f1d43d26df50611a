"""Where an engine's host memory goes, stage by stage (diagnosis: ``GEMMA_CHAT_MEMORY_TRACE=1``).

Logs, in the engine's own log, this process's anonymous resident memory (``RssAnon``: what the
weights, the KV cache and every buffer take; file pages are left out) after each start stage of
vLLM's model runner — the model loaded, the warm-up's dummy passes, the KV cache — and after its
first steps, with what the allocator holds live and keeps free (tcmalloc, which vLLM's CPU build
preloads; where it is not there, only ``RssAnon``). ``bench --memory`` reads these lines.
Standard library only until vLLM's modules are imported.
"""

from __future__ import annotations

import ctypes
import functools
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import, wrap_own_methods
from backend.compat.engine_log import log
from backend.compat.processes.malloc_trim import RUNNERS
from backend.config import switch_rules
from backend.config.switch_rules import on

ENV = switch_rules.MEMORY_TRACE
STAGES = (
    "load_model",
    "warming_up_model",
    "_dummy_run",
    "_dummy_sampler_run",
    "profile_run",
    "initialize_kv_cache",
    "execute_model",
)
FIRST_STEPS = 3
MARK = "gemma-chat memory:"
_PATCHED = "_gemma_chat_memory_trace"
_steps = {"count": 0}


def rss_anon_bytes(pid: int | str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tcmalloc(prop: str) -> int | None:
    try:
        lib = ctypes.CDLL(None)
        get = lib.MallocExtension_GetNumericProperty
    except (OSError, AttributeError):
        return None
    value = ctypes.c_size_t(0)
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    return int(value.value) if get(prop.encode(), ctypes.byref(value)) else None


def snapshot(stage: str) -> str:
    gib = 2**30
    anon = rss_anon_bytes()
    parts = [f"{MARK} {stage}: RssAnon {anon / gib:.2f} GiB" if anon is not None else f"{MARK} {stage}: ?"]
    live = _tcmalloc("generic.current_allocated_bytes")
    free = _tcmalloc("tcmalloc.pageheap_free_bytes")
    if live is not None and free is not None:
        parts.append(f"allocator live {live / gib:.2f} GiB, kept free {free / gib:.2f} GiB")
    return ", ".join(parts)


def _traced(name: str, method: Any) -> Any:
    @functools.wraps(method)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            if name != "execute_model":
                log(snapshot(f"after {name}"))
            elif _steps["count"] < FIRST_STEPS:
                _steps["count"] += 1
                log(snapshot(f"after step {_steps['count']}"))

    return traced


def patch_runner(module: ModuleType) -> None:
    """Trace the stages the runner class defines itself (the CPU runner's own and its parent's)."""
    if not on(ENV) or getattr(module, _PATCHED, False):
        return
    wrap_own_methods(getattr(module, RUNNERS[module.__name__]), STAGES, _traced)
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    for name in RUNNERS:
        after_import(name, patch_runner)
