"""The optimized engine's waiting readers sleep between looks at vLLM's shared-memory ring."""

from __future__ import annotations

import threading
import time

import pytest

from backend.compat import blocking_wait
from backend.engine.model_source import ModelSource
from backend.engine.profiles import EngineProfile, engine_config
from backend.settings import EngineSettings
from tests.vllm_ring import cpu_per_wall, reader_and_writer


@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """vLLM's module with ``SpinCondition.wait`` and ``notify`` restored after the test."""
    from vllm.distributed.device_communicators import shm_broadcast

    monkeypatch.setattr(shm_broadcast.SpinCondition, "wait", shm_broadcast.SpinCondition.wait)
    monkeypatch.setattr(shm_broadcast.SpinCondition, "notify", shm_broadcast.SpinCondition.notify)
    monkeypatch.delattr(shm_broadcast, "_gemma_chat_blocking_wait", raising=False)
    return shm_broadcast


def _busy_cpu_per_wall(reader) -> float:  # type: ignore[no-untyped-def]
    """CPU time this thread spends per second of waiting inside the busy-loop window."""
    reader.record_read()
    return cpu_per_wall(reader)


def test_only_where_the_engine_asks(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(blocking_wait.ENV, raising=False)
    original = ring.SpinCondition.wait
    blocking_wait.patch(ring)
    assert ring.SpinCondition.wait is original


def test_a_waiting_reader_sleeps_instead_of_spinning(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    reader, _ = reader_and_writer(ring)
    stock = _busy_cpu_per_wall(reader)
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    patched = _busy_cpu_per_wall(reader)
    assert stock > 0.5, f"vLLM's reader spins (used {stock:.2f} of a core)"
    assert patched < 0.25, f"the patched reader used {patched:.2f} of a core while waiting"


def test_past_the_window_it_still_wakes_on_a_notification(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    reader, writer = reader_and_writer(ring)
    reader.last_read = time.monotonic() - 10  # idle: vLLM's own path, the notification socket
    time.sleep(0.2)  # let the subscription reach the writer
    threading.Timer(0.1, writer.notify).start()
    started = time.monotonic()
    reader.wait(timeout_ms=3000)
    assert time.monotonic() - started < 2.0


class _CountingSocket:
    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.sent = inner, 0

    def send(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.sent += 1
        return self.inner.send(*args, **kwargs)


def test_a_writer_notifies_at_most_once_a_quarter_second(ring, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    _, writer = reader_and_writer(ring)
    writer.local_notify_socket = counting = _CountingSocket(writer.local_notify_socket)
    for _ in range(50):
        writer.notify()
    assert counting.sent == 1
    time.sleep(blocking_wait.NOTIFY_EVERY_S + 0.05)
    writer.notify()
    assert counting.sent == 2


def test_messages_without_a_notification_still_reach_every_reader_at_once(
    ring, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """vLLM's real ring, reader in a thread. A message that follows another within a quarter second
    goes without a notification; the reader gets it at once whether it was busy past its one-second
    look-only window (it then finds the message before it waits) or idle past it (the next message
    more than a quarter second on is notified) - not at vLLM's 5 s recheck."""
    monkeypatch.setenv(blocking_wait.ENV, "1")
    blocking_wait.patch(ring)
    writer = ring.MessageQueue(1, 1)
    handle = writer.export_handle()
    busy_after = (1.3, 0.0, 0.0, 0.0)  # seconds the reader works after reading each message
    read_at: list[float] = []

    def reader_thread() -> None:
        reader = ring.MessageQueue.create_from_handle(handle, 0)
        reader.wait_until_ready()
        for work in busy_after:
            reader.dequeue(timeout=10)
            read_at.append(time.monotonic())
            time.sleep(work)

    thread = threading.Thread(target=reader_thread, daemon=True)
    thread.start()
    writer.wait_until_ready()
    writer._spin_condition.local_notify_socket = counting = _CountingSocket(
        writer._spin_condition.local_notify_socket
    )
    written: list[float] = []
    for delay in (0.0, 0.1, 2.5, 0.1):  # m1 while the reader works; m2 after it went idle; m3 soon after
        time.sleep(delay)
        writer.enqueue(len(written))
        written.append(time.monotonic())
    thread.join(timeout=15)
    assert len(read_at) == 4, "every message read"
    free = [written[0], read_at[0] + busy_after[0], read_at[1], read_at[2]]
    late = [read - max(w, f) for read, w, f in zip(read_at, written, free, strict=True)]
    assert max(late) < 0.5, f"seconds each message waited for a reader that was free: {late}"
    assert counting.sent == 2, "m0 and m2 notified, m1 and m3 not"


def test_the_optimized_path_asks_for_it_on_a_cpu(tiny_source: ModelSource) -> None:
    settings = EngineSettings()
    optimized = engine_config(EngineProfile.optimized(), tiny_source, settings)
    assert (
        optimized.env[blocking_wait.ENV].value == 1
        and "no bit changes" in optimized.env[blocking_wait.ENV].reason
    )
    for profile in (EngineProfile.baseline(), EngineProfile.eager()):
        assert blocking_wait.ENV not in engine_config(profile, tiny_source, settings).env
