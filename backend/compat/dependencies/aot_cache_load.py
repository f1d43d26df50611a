"""vLLM 0.32's AOT compile cache loads on the CPU build.

The problem: on a CPU, vLLM compiles the model with plain torch.compile (mode
``DYNAMO_TRACE_ONCE``, backend ``inductor``) rather than its own piecewise backend, and saves the
result with torch's AOT precompile (``VLLM_USE_AOT_COMPILE``, on by default). Loading it back
(``vllm.compilation.decorators._try_load_aot_compiled_fn``) ends with
``loaded_fn._artifacts.compiled_fn.finalize_loading(vllm_config)``, a method only vLLM's own
``VllmSerializableFunction`` has. Inductor's artifact is torch's
``BundledAOTAutogradSerializableCallable``, which forwards unknown attributes to the plain
function inside it, so every start logged ``Compiling model again due to a load failure …
reason: 'function' object has no attribute 'finalize_loading'`` and compiled the model again
(about 40 s of a 70 s start of the demo on a 2-core EPYC).

The fix: ``BundledAOTAutogradSerializableCallable`` gets a ``finalize_loading`` that does
nothing. Nothing is left to do: torch deserialized the compiled graph completely when the file
was read (``deserialize_compile_artifacts``), which is what vLLM's method does lazily for its
own backend. The same compiled code runs as after a fresh compile (tests/engine/local/test_startup.py checks
the tokens of a loaded start against those of a compiling one).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import say_missing

MODULE = "torch._dynamo.aot_compile_types"
_PATCHED = "_gemma_chat_finalize_loading"
CLASS = "BundledAOTAutogradSerializableCallable"


def _already_loaded(self: Any, vllm_config: Any) -> None:
    """Torch loaded the compiled graph when it read the file: nothing left to finalize."""
    return None


def patch(module: ModuleType) -> None:
    cls = getattr(module, CLASS, None)
    if cls is None:
        say_missing("AOT cache load", module, [CLASS])  # optional: skipped, but not in silence
        return
    if getattr(cls, _PATCHED, False) or "finalize_loading" in vars(cls):
        return
    cls.finalize_loading = _already_loaded
    setattr(cls, _PATCHED, True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
