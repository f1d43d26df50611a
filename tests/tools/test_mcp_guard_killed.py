"""An MCP server that SIGKILLs its guard does not outlive gemma-chat (issue 64, item 19): the
server dies with its guard (a parent-death signal), and what it started is adopted by the app (a
child subreaper) and ended when the app ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests.hostile.test_hostile_processes import ROOT, SERVER, _server_pids, _survivors

OWNER = """
import sys, time
from backend.lifetime.owner import own
from backend.config.settings import McpServerSettings
from backend.tools.mcp.host import McpHost
own()
server = McpServerSettings(command=sys.executable, args=[sys.argv[1], sys.argv[2], "kill-guard"])
host = McpHost({"h": server})
host.start()
try:
    host.wait_settled(60)
    print("settled", flush=True)
    time.sleep(600)
finally:
    host.close()
"""


def test_a_server_that_kills_its_guard_dies_with_it_and_leaves_nothing_after_the_app(tmp_path: Path) -> None:
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
        server, plain, detached = _server_pids(pidfile)
        assert not _survivors([server]), "the server outlived its guard"
        for child in (plain, detached):  # adopted by the app, not by init
            if psutil.pid_exists(child):
                assert psutil.Process(child).ppid() == app.pid
        os.kill(app.pid, signal.SIGTERM)
        app.wait(30)
        left = _survivors([server, plain, detached])
        assert not left, f"left running after the app: {left}"
    finally:
        if app.poll() is None:
            app.kill()
        for pid in _server_pids(pidfile, 0.0) if pidfile.exists() else []:
            if psutil.pid_exists(pid):
                os.kill(pid, signal.SIGKILL)
