"""A CPU engine's start-up warm-up runs a short dummy batch, not a whole step's worth of tokens.

The problem: vLLM's CPU model runner warms up (``warming_up_model``) by running its profiling pass:
a dummy forward over ``max_num_batched_tokens`` tokens (2,048), through the model and the drafter.
On the CPU build the KV cache has a set size, so the pass measures nothing; it is there to compile
(or load the compiled graph from the cache) — which any batch does, the graph being traced for the
whole range of sizes. At Gemma 4 E2B's size on 2 cores the 2,048 tokens took 37 s of every start,
warm or cold.

The fix: during ``warming_up_model`` the runner's ``max_num_tokens`` reads ``WARM_TOKENS``, so the
dummy pass runs that many; the buffers, the compiled graph's range and every later step are as
before. Both paths (a start-up fix). ``GEMMA_CHAT_FULL_WARMUP=1`` restores vLLM's own pass.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.v1.worker.cpu_model_runner"
FULL_ENV = switch_rules.FULL_WARMUP
WARM_TOKENS = 16
_PATCHED = "_gemma_chat_short_warmup"


def _short(original: Any) -> Any:
    @functools.wraps(original)
    def warming_up_model(self: Any) -> None:
        full = self.max_num_tokens
        self.max_num_tokens = min(full, WARM_TOKENS)
        try:
            original(self)
        finally:
            self.max_num_tokens = full

    return warming_up_model


def patch(module: ModuleType) -> None:
    if not on(FULL_ENV):
        wrap(
            module,
            {"CPUModelRunner.warming_up_model": _short},
            mark=_PATCHED,
            label="short warm-up",
            on_class=True,
        )


def install_import_hook() -> None:
    after_import(MODULE, patch)
