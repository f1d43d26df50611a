"""vLLM's real shared-memory ring wait (``SpinCondition``), for the tests of how its readers wait."""

from __future__ import annotations

import time
from typing import Any


def reader_and_writer(module: Any) -> tuple[Any, Any]:
    """A reader and a writer ``SpinCondition`` of ``module`` (vLLM's ``shm_broadcast``) on one socket."""
    import zmq
    from vllm.utils.network_utils import get_open_zmq_ipc_path

    context = zmq.Context()
    address = get_open_zmq_ipc_path()
    writer = module.SpinCondition(is_reader=False, context=context, notify_address=address)
    reader = module.SpinCondition(is_reader=True, context=context, notify_address=address)
    return reader, writer


def cpu_per_wall(reader: Any, seconds: float = 0.3) -> float:
    """CPU time this thread spends per second of waiting on ``reader`` (from its last read on)."""
    wall, cpu = time.monotonic(), time.thread_time()
    while time.monotonic() - wall < seconds:
        reader.wait(timeout_ms=10)
    return (time.thread_time() - cpu) / (time.monotonic() - wall)
