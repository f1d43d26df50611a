"""An engine start that neither gets ready nor fails ends with a message (issue 64, item 6), and a
start that fails on a full disk names the disk (item 17). The engine core here is a stand-in
process, as ``processes.spawned`` finds vLLM's (``multiprocessing`` in its command line): it writes
what vLLM's core writes when its initialisation raised, then never exits; or it just sleeps."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import psutil
import pytest

from backend.engine.local import log as engine_log
from backend.engine.local import start_watch
from backend.engine.local.disk_space import full_disk
from backend.engine.local.log import diagnose
from backend.engine.local.vllm import VllmEngine
from backend.errors import EngineStartFailed

FAILED_CORE = """
import sys, time
with open(sys.argv[1], "a") as log:
    log.write("(EngineCore pid=1) ERROR 12-07 21:00:00 [core.py:1510] EngineCore failed to start.\\n"
              "Traceback (most recent call last):\\n"
              "(EngineCore pid=1) ValueError: the cache root holds a quote\\n")
time.sleep(300)
"""
SLEEPING_CORE = "import time; time.sleep(300)"
BACKSTOP_S = 90.0
"""Far past the bounds below: the code before the fix never returns at all."""


def _engine_with_core(log: Path, script: str, cores: list[subprocess.Popen[bytes]]) -> VllmEngine:
    """A ``VllmEngine`` whose build spawns ``script`` as its engine core and, like vLLM's, returns
    only when that core has exited (then raising vLLM's words for it)."""
    engine = VllmEngine(cast(Any, SimpleNamespace(path=log.parent)), cast(Any, None), log_path=log)

    def build() -> Any:
        engine._building = {p.pid for p in psutil.Process().children(recursive=True)}
        core = subprocess.Popen([sys.executable, "-c", script, str(log), "multiprocessing-stand-in"])
        cores.append(core)
        core.wait()
        engine._building = None
        raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    cast(Any, engine)._imports = lambda: None
    cast(Any, engine)._build = build
    cast(Any, engine)._load_renderer = lambda: None
    return engine


def _start_failure(engine: VllmEngine) -> tuple[str, float]:
    began = time.monotonic()
    with pytest.raises(EngineStartFailed) as failed:
        asyncio.run(asyncio.wait_for(engine.start(), BACKSTOP_S))
    return str(failed.value), time.monotonic() - began


@pytest.fixture
def cores() -> Any:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for core in started:
        core.kill()
        core.wait(10)


def test_a_core_that_failed_and_does_not_exit_is_stopped_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: list[subprocess.Popen[bytes]]
) -> None:
    monkeypatch.setattr(start_watch, "POLL_S", 0.2)
    monkeypatch.setattr(start_watch, "FAILED_GRACE_S", 1.0)
    log = tmp_path / "engine.log"
    log.write_text("an earlier start: EngineCore failed to start.\n")  # before this start: not counted
    message, took = _start_failure(_engine_with_core(log, FAILED_CORE, cores))
    assert (
        "The engine core said it failed to start and had not exited 1 s later, so it was stopped." in message
    )
    assert "ValueError: the cache root holds a quote" in message, message
    assert took < BACKSTOP_S / 2 and cores[0].poll() is not None


def test_a_core_that_makes_no_progress_is_stopped_after_the_stall_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: list[subprocess.Popen[bytes]]
) -> None:
    monkeypatch.setattr(start_watch, "POLL_S", 0.2)
    monkeypatch.setattr(start_watch, "STALL_S", 2.0)
    message, _ = _start_failure(_engine_with_core(tmp_path / "engine.log", SLEEPING_CORE, cores))
    assert "used no CPU time and wrote nothing to its log for 2 s, so it was stopped" in message, message
    assert cores[0].poll() is not None


def test_a_log_from_an_earlier_start_is_not_this_starts_failure(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(f"{start_watch.FAILED_MARK}.\n")
    watch = start_watch.StartWatch.from_now(log)
    watch.failed_grace_s = 0.0
    assert watch.verdict([psutil.Process()]) == ""
    with log.open("a") as more:
        more.write(f"{start_watch.FAILED_MARK}.\n")
    assert watch.verdict([psutil.Process()]).startswith("said it failed to start")


def test_a_retry_after_a_failed_attempt_is_not_stopped_for_that_failure(tmp_path: Path) -> None:
    """A start that failed on a stale compiled graph is retried (compiling afresh) inside the same
    watched start: the first attempt's "failed to start" must not stop the retry's new processes."""
    log = tmp_path / "engine.log"
    log.write_text("")
    watch = start_watch.StartWatch.from_now(log)
    watch.failed_grace_s = 0.0
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    retry = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with log.open("a") as more:
            more.write(f"{start_watch.FAILED_MARK}.\n")
        assert watch.verdict([psutil.Process(first.pid)]).startswith("said it failed to start")
        first.kill()
        assert watch.verdict([psutil.Process(retry.pid)]) == "", "the retry is a new attempt"
    finally:
        for process in (first, retry):
            process.kill()
            process.wait()


def test_a_start_failed_on_a_full_disk_names_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_log, "LOW_BYTES", 1 << 62)  # every disk is "full" below that
    log = tmp_path / "logs" / "engine.log"
    log.parent.mkdir()
    log.write_bytes(b"")  # what a full disk leaves of it
    error = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    found = diagnose(error, "", log)
    assert found.problem.startswith(f"The engine could not start: {log.parent} is on a full disk (")
    assert "mounted at /" in found.problem and "GEMMA_CHAT_HOME" in found.fix


def test_a_disk_with_room_is_not_called_full(tmp_path: Path) -> None:
    assert full_disk([tmp_path], low_bytes=1) is None
    said = full_disk([tmp_path / "not" / "made"], low_bytes=1 << 62)
    assert said is not None and said.startswith(f"{tmp_path / 'not' / 'made'} is on a full disk")
