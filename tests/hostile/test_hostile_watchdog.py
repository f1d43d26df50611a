"""A process gemma-chat started ends when its parent is gone even when its own shutdown hangs
(``backend/lifetime/watchdog.py``): SIGTERM starts the interpreter's shutdown, and a shutdown that
hangs once finalization has begun (a C library's teardown: zmq's context waits for its sockets)
stops the watchdog's daemon thread before its SIGKILL — an engine core was seen alive 30 s after
its parent was SIGKILLed, under load. The kill now also comes from a shell of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from backend.lifetime.watchdog import GRACE_S

CHILD = """
import signal, sys, time

class HangsAtTeardown:
    def __del__(self):  # runs while the interpreter finalizes: daemon threads can no longer run
        time.sleep(3600)

keep = HangsAtTeardown()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""

MIDDLE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
child.wait()
"""


def test_a_child_whose_shutdown_hangs_still_ends_after_its_parent_is_killed() -> None:
    env = {**os.environ, "GEMMA_CHAT_OWNER": "1"}  # as under gemma-chat: the children watch their parent
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, CHILD],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert middle.stdout is not None
        child = psutil.Process(int(middle.stdout.readline()))
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait(10)
        began = time.monotonic()
        try:
            child.wait(GRACE_S + 10)
        except psutil.TimeoutExpired:
            child.kill()
            raise AssertionError(f"alive {GRACE_S + 10:.0f} s after its parent was SIGKILLed") from None
        assert time.monotonic() - began < GRACE_S + 10
    finally:
        if middle.poll() is None:
            middle.kill()


def _shell(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["/bin/sh", "-c", script])


def test_the_delayed_kill_spares_a_process_that_took_the_pid() -> None:
    """Hardening round 4 (issue 55, item 3): the shell checked only that *some* process had the PID:
    an unrelated ``sleep`` that took a freed PID was SIGKILLed. A start time that is not the
    victim's stands for a PID taken again: the shell leaves it alone and ends."""
    from backend.lifetime.watchdog import KILL_LATER, start_ticks

    stranger = subprocess.Popen(["sleep", "30"])
    try:
        real = start_ticks(stranger.pid)
        assert real is not None
        other = str(int(real) + 1)
        shell = _shell(KILL_LATER.format(pid=stranger.pid, start=other, rounds=2))
        assert shell.wait(5) == 0
        assert stranger.poll() is None, "an unrelated process with the PID survives"
        shell = _shell(KILL_LATER.format(pid=stranger.pid, start=real, rounds=2))
        shell.wait(5)
        assert stranger.wait(5) == -9, "the process it was meant for is killed"
    finally:
        stranger.kill()


def test_the_delayed_kill_ends_as_soon_as_its_process_does() -> None:
    """A clean exit leaves no shell behind for the rest of the grace period."""
    from backend.lifetime.watchdog import KILL_LATER, start_ticks

    target = subprocess.Popen(["sleep", "0.3"])
    start = start_ticks(target.pid)
    assert start is not None
    shell = _shell(KILL_LATER.format(pid=target.pid, start=start, rounds=21))
    began = time.monotonic()
    target.wait(5)
    assert shell.wait(5) == 0 and time.monotonic() - began < 2.0
