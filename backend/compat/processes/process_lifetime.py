"""Every process gemma-chat starts notices when its parent is gone (``backend.lifetime.watchdog``).

At interpreter start (the ``.pth`` hook) this covers spawned processes: vLLM's engine core and
workers under the ``spawn`` start method, and multiprocessing's resource tracker. A forked child
runs no ``.pth``, so vLLM's engine-core and worker entry points also start the watch as they
begin. The wrappers keep the originals' names, so ``spawn`` still pickles them by reference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.lifetime.watchdog import watch_parent

ENGINE_CORE = "vllm.v1.engine.core"
EXECUTOR = "vllm.v1.executor.multiproc_executor"


def _watching(entry: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(entry, "_gemma_chat_watching", False):
        return entry

    @functools.wraps(entry)
    def run(*args: Any, **kwargs: Any) -> Any:
        watch_parent()
        return entry(*args, **kwargs)

    run._gemma_chat_watching = True  # type: ignore[attr-defined]
    return run


def patch_engine_core(module: ModuleType) -> None:
    owner = module.EngineCoreProc
    owner.run_engine_core = staticmethod(_watching(owner.run_engine_core))


def patch_executor(module: ModuleType) -> None:
    owner = module.WorkerProc
    owner.worker_main = staticmethod(_watching(owner.worker_main))


def install_import_hook() -> None:
    watch_parent()
    after_import(ENGINE_CORE, patch_engine_core)
    after_import(EXECUTOR, patch_executor)
