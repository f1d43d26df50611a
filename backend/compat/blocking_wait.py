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
one sleeps until the 5 s recheck.)

The writer's side: vLLM's writer sends a notification on that socket after every message (a zmq
send: 5% of the worker's time in a decode step here, and a wake-up of zmq's I/O thread). A
reader waits on the socket only once ``busy_loop_s`` (1 s) has passed since its last read, so a
writer that notified less than ``NOTIFY_EVERY_S`` (0.25 s) ago skips the notification: a reader
that has read the notified message is still in its look-only window when this one lands (the
window outlasts the gap), and one that has not finds both messages in the ring before it waits.

What is read is unchanged: this moves no bit, only when a process waits and wakes. Standard
library only until vLLM's module is imported.
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


NOTIFY_EVERY_S = 0.25
"""A writer that notified less than this ago skips the notification (a quarter of a reader's
one-second look-only window)."""
_NOTIFIED = "_gemma_chat_notified"


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
    notify = condition.notify

    def quiet_notify(self: Any) -> None:
        now = time.monotonic()
        if now - getattr(self, _NOTIFIED, -NOTIFY_EVERY_S) < NOTIFY_EVERY_S:
            return  # every reader is still looking at the ring (the module's docstring)
        setattr(self, _NOTIFIED, now)
        notify(self)

    condition.notify = quiet_notify
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
