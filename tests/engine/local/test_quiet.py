"""The pause before timing one engine after another, against vLLM's real ring reader."""

from __future__ import annotations

import inspect
import time
from typing import Any

import pytest

from backend.engine.local import quiet


def _ring() -> tuple[Any, Any]:
    """A reader and a writer ``SpinCondition`` of vLLM's shared-memory ring on one socket (the
    reader waits the way the baseline's worker does)."""
    import zmq
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition
    from vllm.utils.network_utils import get_open_zmq_ipc_path

    context = zmq.Context()
    address = get_open_zmq_ipc_path()
    writer = SpinCondition(is_reader=False, context=context, notify_address=address)
    reader = SpinCondition(is_reader=True, context=context, notify_address=address)
    return reader, writer


def _cpu_per_wall(reader: Any, seconds: float = 0.3) -> float:
    """CPU time this thread spends per second of waiting on ``reader`` (from its last read on)."""
    wall, cpu = time.monotonic(), time.thread_time()
    while time.monotonic() - wall < seconds:
        reader.wait(timeout_ms=10)
    return (time.thread_time() - cpu) / (time.monotonic() - wall)


def test_the_window_is_read_from_the_installed_vllm() -> None:
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition

    parameter = inspect.signature(SpinCondition.__init__).parameters.get("busy_loop_s")
    assert parameter is not None, "vLLM renamed its busy window: quiet.busy_window_s reads a fallback"
    assert quiet.busy_window_s() == float(parameter.default)
    assert quiet.settle_s() == pytest.approx(quiet.busy_window_s() + quiet.MARGIN_S)


@pytest.mark.cpu_share
async def test_stock_vllms_reader_spins_after_a_read_and_is_quiet_after_the_settle() -> None:
    """The stock reader (the baseline's worker) holds a core right after a read; ``settle_s`` later
    it sleeps on its socket."""
    reader, _writer = _ring()  # the writer kept alive for the whole test, as in vLLM
    reader.record_read()
    spinning = _cpu_per_wall(reader)
    reader.record_read()
    started = time.monotonic()
    await quiet.settle()
    assert time.monotonic() - started >= quiet.settle_s() - 0.01
    settled = _cpu_per_wall(reader)
    assert spinning > 0.5, f"right after a read vLLM's reader used {spinning:.2f} of a core"
    assert settled < 0.1, f"after the settle it still used {settled:.2f} of a core"
