"""Timing one engine right after another: let the other's busy window pass first.

After every read from its shared-memory ring, vLLM's model worker keeps looking at the ring for
``SpinCondition.busy_loop_s`` (one second in vLLM 0.32) before it sleeps; stock vLLM looks by
spinning (``sched_yield`` in a loop), so for a second after each request the baseline's worker
holds a core (measured on a 2-core AMD EPYC: 0.98-1.00 CPU seconds of the 1.2 s after a request;
the optimized path's sleeping wait, 0.07-0.08). A run timed in that second shares the machine
with it: on two cores, half of it. Whatever times one engine right after another — the bench's
interleaved paths, the compare view's second path, the speculation probe's candidates — first
waits ``settle_s()``, so each run starts on a machine its neighbour has left alone.
"""

from __future__ import annotations

import asyncio
import inspect

VLLM_BUSY_WINDOW_S = 1.0
"""vLLM 0.32's ``busy_loop_s`` default, used where vLLM's own cannot be read."""
MARGIN_S = 0.2
"""Past the window: the reader notices it has passed at its next look."""


def busy_window_s() -> float:
    """How long vLLM's ring readers keep looking after a read (read from the installed vLLM)."""
    try:
        from vllm.distributed.device_communicators.shm_broadcast import SpinCondition
    except ImportError:  # no vLLM in this process (a remote engine's client)
        return VLLM_BUSY_WINDOW_S
    default = inspect.signature(SpinCondition.__init__).parameters.get("busy_loop_s")
    if default is None or not isinstance(default.default, (int, float)):
        return VLLM_BUSY_WINDOW_S
    return float(default.default)


def settle_s() -> float:
    """The pause before timing an engine that ran after another one."""
    return busy_window_s() + MARGIN_S


async def settle(seconds: float | None = None) -> None:
    """Wait until the engine that ran last has stopped looking at its ring."""
    await asyncio.sleep(settle_s() if seconds is None else seconds)
