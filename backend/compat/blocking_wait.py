"""The optimized path's engine processes wait for each other without spinning.

vLLM's engine core and its model worker hand every step to each other through a shared-memory
ring (``vllm.distributed.device_communicators.shm_broadcast``). A reader that finds no message
spins — ``sched_yield`` in a loop — for a second after its last read before it sleeps on the
ring's notification socket (``SpinCondition.busy_loop_s``). While one request decodes, the
engine core therefore keeps a core busy the whole time the worker computes, and the worker
spins while the engine core schedules. On a GPU machine the model runs elsewhere and that
costs nothing; on a CPU the spinning process competes with the model's own threads for the
same cores. Where the engine's environment sets ``GEMMA_CHAT_BLOCKING_WAIT=1`` (the optimized
profile does on a CPU; the baseline never does), a reader in that window sleeps ``POLL_S``
between looks instead of yielding. (Sleeping on the notification socket alone is not safe:
the writer's notifications can be dropped — its socket keeps one — and a reader that misses
one sleeps until the 5 s recheck.) What is read is unchanged: this moves no bit, only when a
process waits. Standard library only until vLLM's module is imported.
"""

from __future__ import annotations

import os
import time
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once

MODULE = "vllm.distributed.device_communicators.shm_broadcast"
ENV = "GEMMA_CHAT_BLOCKING_WAIT"
_PATCHED = "_gemma_chat_blocking_wait"
IN_USE = "gemma-chat blocking wait: in use (engine processes sleep between steps instead of spinning)"


POLL_S = 50e-6
"""How long a waiting reader sleeps between looks at the ring (the wait's added latency is about this)."""


def patch(module: Any) -> None:
    if os.environ.get(ENV) != "1" or getattr(module, _PATCHED, False):
        return
    condition = module.SpinCondition
    original = condition.wait

    def wait(self: Any, timeout_ms: int | None = None) -> None:
        log_once(IN_USE)  # at the first wait: vLLM's logging is not set up at import
        if time.monotonic() <= self.last_read + self.busy_loop_s:
            time.sleep(POLL_S)  # instead of sched_yield: the core is free in between
        else:
            original(self, timeout_ms)

    condition.wait = wait
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
