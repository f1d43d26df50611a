"""The optimized engine's waiting readers sleep between looks at vLLM's shared-memory ring."""

from __future__ import annotations

import threading
import time

import pytest

from backend.compat import blocking_wait
from backend.engine.model_source import ModelSource
from backend.engine.profiles import EngineProfile, engine_config
from backend.settings import EngineSettings


@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """vLLM's module with ``SpinCondition.wait`` restored after the test."""
    from vllm.distributed.device_communicators import shm_broadcast

    monkeypatch.setattr(shm_broadcast.SpinCondition, "wait", shm_broadcast.SpinCondition.wait)
    monkeypatch.delattr(shm_broadcast, "_gemma_chat_blocking_wait", raising=False)
    return shm_broadcast


def _reader_and_writer(module):  # type: ignore[no-untyped-def]
    import zmq
    from vllm.utils.network_utils import get_open_zmq_ipc_path

    context = zmq.Context()
    address = get_open_zmq_ipc_path()
    writer = module.SpinCondition(is_reader=False, context=context, notify_address=address)
    reader = module.SpinCondition(is_reader=True, context=context, notify_address=address)
    return reader, writer


def _busy_cpu_per_wall(reader, seconds: float = 0.3) -> float:  # type: ignore[no-untyped-def]
    """CPU time this thread spends per second of waiting inside the busy-loop window."""
    reader.record_read()
    wall, cpu = time.monotonic(), time.thread_time()
    while time.monotonic() - wall < seconds:
        reader.wait(timeout_ms=10)
    return (time.thread_time() - cpu) / (time.monotonic() - wall)


def test_only_where_the_engine_asks(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(blocking_wait.ENV, raising=False)
    original = ring.SpinCondition.wait
    blocking_wait.patch(ring)
    assert ring.SpinCondition.wait is original


def test_a_waiting_reader_sleeps_instead_of_spinning(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    reader, _ = _reader_and_writer(ring)
    stock = _busy_cpu_per_wall(reader)
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    patched = _busy_cpu_per_wall(reader)
    assert stock > 0.5, f"vLLM's reader spins (used {stock:.2f} of a core)"
    assert patched < 0.25, f"the patched reader used {patched:.2f} of a core while waiting"


def test_past_the_window_it_still_wakes_on_a_notification(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    reader, writer = _reader_and_writer(ring)
    reader.last_read = time.monotonic() - 10  # idle: vLLM's own path, the notification socket
    time.sleep(0.2)  # let the subscription reach the writer
    threading.Timer(0.1, writer.notify).start()
    started = time.monotonic()
    reader.wait(timeout_ms=3000)
    assert time.monotonic() - started < 2.0


def test_the_optimized_path_asks_for_it_on_a_cpu(tiny_source: ModelSource) -> None:
    settings = EngineSettings()
    optimized = engine_config(EngineProfile.optimized(), tiny_source, settings)
    assert (
        optimized.env[blocking_wait.ENV].value == 1
        and "no bit changes" in optimized.env[blocking_wait.ENV].reason
    )
    for profile in (EngineProfile.baseline(), EngineProfile.eager()):
        assert blocking_wait.ENV not in engine_config(profile, tiny_source, settings).env
