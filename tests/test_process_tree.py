"""The tests' process helpers tolerate zombies and races (issue 64, item 28: ``p.cmdline()`` on a
zombie child raised ``psutil.ZombieProcess`` and failed an MCP test 1 run in 4)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from tests.support.process_tree import alive, command_line, descendant_pids, descendants_running


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has ended and is not reaped (no ``wait``): a zombie until the test reaps it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.05)
    return child


def test_a_zombie_child_is_ended_not_an_error() -> None:
    zombie = _zombie()
    try:
        assert zombie.pid in {p.pid for p in psutil.Process().children(recursive=True)}
        assert command_line(zombie.pid) == ""  # psutil itself raises ZombieProcess here
        assert zombie.pid not in descendants_running("")
        assert zombie.pid not in descendant_pids()
        assert alive([zombie.pid]) == []
    finally:
        zombie.wait()
    assert command_line(zombie.pid) == "" and alive([zombie.pid]) == []  # reaped: gone


def test_a_live_child_is_found_by_its_command_line() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # process-tree-probe"])
    try:
        deadline = time.monotonic() + 30
        while child.pid not in descendants_running("process-tree-probe"):
            assert time.monotonic() < deadline, "the child was never seen"
            time.sleep(0.05)
        assert alive([child.pid]) == [child.pid]
    finally:
        child.kill()
        child.wait()
