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

import pytest

from tests.support.process_tree import alive, command_line, descendant_pids, descendants_running

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "hostile" / "hostile_mcp_server.py"
ENDED_WITHIN_S = 20.0
"""The guard's grace (2 s) and the watchdogs' (10 s), with room for a loaded machine."""


def _survivors(pids: list[int], within_s: float = ENDED_WITHIN_S) -> list[str]:
    deadline = time.monotonic() + within_s
    while (running := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [f"{pid} {command_line(pid)[:80]}" for pid in alive(running)]


def _server_pids(pidfile: Path, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the MCP server never started"
        time.sleep(0.1)
    return [int(line) for line in pidfile.read_text().split()]


def test_host_close_ends_a_server_that_ignores_eof_and_its_detached_child(tmp_path: Path) -> None:
    from backend.config.settings import McpServerSettings
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
from backend.config.settings import McpServerSettings
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
        tree = descendant_pids(app.pid)
        os.kill(app.pid, signum)
        app.wait(30)
        left = _survivors([*pids, *tree])
        assert not left, f"{signal.Signals(signum).name}: left running {left}"
    finally:
        if app.poll() is None:
            app.kill()


LONG = "Write a function that reverses a linked list."
"""The demo model goes on for its whole reply budget here: long enough to stop mid-reply."""


def _engine_started(pid: int) -> bool:
    return bool(descendants_running("EngineCore", pid))


@pytest.mark.engine
@pytest.mark.parametrize(("signum", "moment"), [(signal.SIGKILL, "reply"), (signal.SIGHUP, "start")])
def test_ask_ended_mid_reply_or_mid_start_leaves_no_process(tmp_path: Path, signum: int, moment: str) -> None:
    """``ask --demo`` SIGKILLed mid-reply (its children notice) or sent SIGHUP while the engine
    starts (it unwinds and ends them): no engine core, worker or resource tracker survives."""
    ask = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "ask", "--demo", LONG, "--max-tokens", "4096"],
        cwd=ROOT,
        env={**os.environ, "GEMMA_CHAT_HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert ask.stdout is not None
        seen: set[int] = set()
        deadline = time.monotonic() + 300
        if moment == "reply":
            os.set_blocking(ask.stdout.fileno(), False)
            out = b""
            while len(out) < 200 and ask.poll() is None and time.monotonic() < deadline:
                out += ask.stdout.read() or b""
                seen.update(descendant_pids(ask.pid))
                time.sleep(0.1)
            assert len(out) >= 200, f"no reply streamed: {out!r}"
        else:
            while not _engine_started(ask.pid) and ask.poll() is None and time.monotonic() < deadline:
                seen.update(descendant_pids(ask.pid))
                time.sleep(0.1)
        seen.update(descendant_pids(ask.pid))
        assert ask.poll() is None and seen, "the command ended before the signal"
        os.kill(ask.pid, signum)
        ask.wait(60)
        left = _survivors(sorted(seen), 30.0)
        assert not left, f"{signal.Signals(signum).name} mid-{moment}: left running {left}"
        if signum != signal.SIGKILL:
            assert ask.returncode == 128 + signum, ask.returncode
    finally:
        if ask.poll() is None:
            ask.kill()


class RecordingTerminal:
    """A ``tests.support.terminal.Terminal`` that also keeps the raw bytes the app wrote after a mark."""

    def __init__(self, home: Path) -> None:
        from tests.support.terminal import Terminal

        env = {**os.environ, "GEMMA_CHAT_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "120"}
        argv = [sys.executable, "-m", "app.cli", "--demo", "--data-dir", str(home / "data")]
        self.term = Terminal(argv, env, cwd=str(ROOT))
        self.raw = b""
        original = self.term.stream.feed

        def feed(data: bytes) -> None:
            self.raw += data
            original(data)

        self.term.stream.feed = feed  # type: ignore[method-assign]


@pytest.mark.engine
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_app_ended_mid_reply_keeps_it_restores_the_terminal_and_leaves_nothing(
    tmp_path: Path, signum: int
) -> None:
    from backend.chat.store import ChatStore

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text("max_tokens = 4096\n")
    recording = RecordingTerminal(tmp_path)
    term = recording.term
    try:
        term.wait_for(r"engine ready", 420, "the optimized engine")
        term.type(LONG)
        term.press("enter")
        term.wait_for(lambda text: "self." in text or "'tix" in text or "def " in text, 60, "streamed text")
        tree = descendant_pids(term.child.pid)
        recording.raw = b""
        os.kill(term.child.pid, signum)
        deadline = time.monotonic() + 60
        while term.child.isalive() and time.monotonic() < deadline:
            term.pump()
        term.pump()
        assert not term.child.isalive(), f"still running 60 s after {signal.Signals(signum).name}"
        left = _survivors(tree, 30.0)
        assert not left, f"{signal.Signals(signum).name}: left running {left}"
        if signum == signal.SIGKILL:
            return  # nothing can be saved or restored by a process that is killed outright
        assert b"\x1b[?1049l" in recording.raw, "the alternate screen was not left"
        assert b"\x1b[?1000l" in recording.raw, "mouse reporting was not turned off"
        store = ChatStore(tmp_path / "data" / "history.db")
        chat = store.last_chat()
        assert chat is not None
        rows = [
            (m.role, m.text, m.extra.get("status"), m.extra.get("stopped_by")) for m in store.branch(chat)
        ]
        assert rows[0][:2] == ("user", LONG), rows
        assert len(rows) == 2 and rows[1][1].strip(), f"the partial reply was lost: {rows}"
        assert rows[1][2:] == ("stopped", signal.Signals(signum).name), rows[1]
    finally:
        term.close()
