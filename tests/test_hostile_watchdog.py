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
