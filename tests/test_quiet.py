"""The pause before timing one engine after another, against vLLM's real ring reader."""

from __future__ import annotations

import inspect
import time

import pytest

from backend.engine import quiet
from tests.vllm_ring import cpu_per_wall, reader_and_writer


def test_the_window_is_read_from_the_installed_vllm() -> None:
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition

    parameter = inspect.signature(SpinCondition.__init__).parameters.get("busy_loop_s")
    assert parameter is not None, "vLLM renamed its busy window: quiet.busy_window_s reads a fallback"
    assert quiet.busy_window_s() == float(parameter.default)
    assert quiet.settle_s() == pytest.approx(quiet.busy_window_s() + quiet.MARGIN_S)


async def test_stock_vllms_reader_spins_after_a_read_and_is_quiet_after_the_settle() -> None:
    """The stock reader (the baseline's worker) holds a core right after a read; ``settle_s`` later
    it sleeps on its socket."""
    from vllm.distributed.device_communicators import shm_broadcast

    reader, _ = reader_and_writer(shm_broadcast)
    reader.record_read()
    spinning = cpu_per_wall(reader)
    reader.record_read()
    started = time.monotonic()
    await quiet.settle()
    assert time.monotonic() - started >= quiet.settle_s() - 0.01
    settled = cpu_per_wall(reader)
    assert spinning > 0.5, f"right after a read vLLM's reader used {spinning:.2f} of a core"
    assert settled < 0.1, f"after the settle it still used {settled:.2f} of a core"
