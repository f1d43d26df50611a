"""Hardening round 4 (issue 55, item 1): a signal ends the app within a bounded time, whatever its
screen's thread is doing. With the loop held (a pasted megabyte being laid out), SIGHUP and SIGTERM
were never seen: the app outlived its terminal until SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

HELD = """
import asyncio, signal, time
from app.tui import exit_deadline

async def main():
    exit_deadline.install({signal.SIGTERM: "SIGTERM"}, print, lambda: True, deadline_s=1.0)
    print("ready", flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:  # the loop's thread held by work that never yields
        pass

asyncio.run(main())
"""

FREE = """
import asyncio, signal
from app.tui import exit_deadline

async def main():
    done = asyncio.Event()

    def quit_by(name):
        print("quit by", name, flush=True)
        exit_deadline.disarm()
        done.set()

    exit_deadline.install({signal.SIGTERM: "SIGTERM"}, quit_by, lambda: True, deadline_s=1.0)
    print("ready", flush=True)
    await done.wait()
    await asyncio.sleep(2.0)  # past the deadline: disarmed, so the process ends by itself

asyncio.run(main())
"""


def _start(script: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def test_a_signal_ends_a_process_whose_loop_is_held() -> None:
    child = _start(HELD)
    began = time.monotonic()
    child.send_signal(signal.SIGTERM)
    try:
        code = child.wait(10)
    finally:
        child.kill()
    assert code == 128 + signal.SIGTERM and time.monotonic() - began < 5
    assert child.stdout is not None and "\x1b[?1049l" in child.stdout.read(), "the terminal restored"


def test_a_free_loop_quits_its_own_way_and_the_deadline_is_disarmed() -> None:
    child = _start(FREE)
    child.send_signal(signal.SIGTERM)
    try:
        code = child.wait(10)
    finally:
        child.kill()
    assert code == 0
    assert child.stdout is not None and "quit by SIGTERM" in child.stdout.read()


def test_a_second_app_in_one_process_hands_on_to_the_first_handler_not_to_the_first_app() -> None:
    import asyncio

    from app.tui import exit_deadline

    original = signal.getsignal(signal.SIGUSR1)
    first_running = [True]

    async def install_twice() -> None:
        exit_deadline.install({signal.SIGUSR1: "SIGUSR1"}, print, lambda: first_running[0])  # type: ignore[dict-item]
        first_running[0] = False
        exit_deadline.install({signal.SIGUSR1: "SIGUSR1"}, print, lambda: False)  # type: ignore[dict-item]

    try:
        asyncio.run(install_twice())
        assert signal.getsignal(signal.SIGUSR1).previous[int(signal.SIGUSR1)] == original  # type: ignore[union-attr]
    finally:
        signal.signal(signal.SIGUSR1, original)
