"""An engine whose every step takes at least a set time: Gemma 4 E2B's speed on a small model (tests).

``GEMMA_CHAT_SLOW_STEP_MS=300`` in an engine's environment makes each call of the model runner's
``execute_model`` last at least 300 ms (it sleeps for what the step left), so the demo model decodes
at E2B-on-2-cores speed: what depends on the model's speed (the first start's speculation decision,
the status bar's estimates) is tested at the real scale's timing without a 10 GB checkpoint. A
verifying step costs the same as a plain one here (an upper bound on speculation's gain). No value
changes. Standard library only until vLLM's modules are imported.
"""

from __future__ import annotations

import functools
import time
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import slow_step_ms

ENV = switch_rules.SLOW_STEP_MS
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
_PATCHED = "_gemma_chat_slow_steps"


def step_ms() -> float:
    return slow_step_ms()


def _at_least(least: float) -> Any:
    def slowed(original: Any) -> Any:
        @functools.wraps(original)
        def execute_model(self: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return original(self, *args, **kwargs)
            finally:
                time.sleep(max(0.0, least - (time.monotonic() - began)))

        return execute_model

    return slowed


def patch_runner(module: ModuleType) -> None:
    least = step_ms() / 1000.0
    if least:
        wrap(module, {"GPUModelRunner.execute_model": _at_least(least)}, mark=_PATCHED, label="slow steps")


def install_import_hook() -> None:
    after_import(RUNNER_MODULE, patch_runner)
