"""The engine core's interpreter started early (backend.compat.processes.early_core): it takes vLLM's
engine-core process only where nothing differs from a fresh spawn, and ends when it is not taken.
The real engine's hand-over (and its tokens) are tested at the end."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.compat.processes import early_core
from backend.compat.processes.early_core import VARIABLE as EARLY_CORE_VARIABLE
from backend.engine.local import start_env
from backend.engine.local.log import capture_stderr
from backend.engine.local.start_env import StartEnv
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.parity import run_parity
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import SamplingSettings
from backend.gemma4.messages import PromptRenderer
from tests.conftest import TEST_ENGINE
from tests.support.early_core_target import EngineCoreProc

MARKER = "GEMMA_CHAT_TESTS_EARLY_MARKER"


@pytest.fixture
def clean_env() -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
    early_core.withdraw()


def _run(out: Path) -> int:
    process = multiprocessing.get_context("spawn").Process(
        target=EngineCoreProc.run_engine_core, args=(str(out), MARKER)
    )
    process.start()
    process.join(60)
    assert process.exitcode == 0
    assert process.pid is not None
    return process.pid


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_engine_core_goes_to_the_waiting_interpreter_with_its_environment_from_exec(
    tmp_path: Path, clean_env: None
) -> None:
    os.environ.pop(MARKER, None)
    env = start_env.predicted(start_env.current(), {MARKER: "set by vLLM"}, {})
    waiting = early_core.prestart(env, preload=("colorsys",))
    os.environ[MARKER] = "set by vLLM"  # what vLLM does before it spawns
    early_core.offer(waiting)
    pid = _run(tmp_path / "out.json")
    seen = early_core.withdraw()
    result = json.loads((tmp_path / "out.json").read_text())
    assert pid == waiting.pid == result["pid"] and result["ppid"] == os.getpid()
    assert result["marker"] == result["marker_at_exec"] == "set by vLLM", "there at exec (LD_PRELOAD)"
    assert result["preloaded"], "imported before the hand-over"
    assert waiting.said == ["the engine core went to the interpreter started early"]
    assert seen is not None and seen[MARKER] == "set by vLLM"


def test_a_different_environment_spawns_afresh_and_ends_the_waiting_one(
    tmp_path: Path, clean_env: None
) -> None:
    waiting = early_core.prestart(start_env.current(), preload=())
    os.environ[MARKER] = "not predicted"
    early_core.offer(waiting)
    pid = _run(tmp_path / "out.json")
    early_core.withdraw()
    assert pid != waiting.pid
    assert json.loads((tmp_path / "out.json").read_text())["marker"] == "not predicted"
    assert waiting.said == [f"spawned afresh: the environment differs in {MARKER}"]
    assert _gone(waiting.pid), "ended and reaped"


def test_only_the_engine_core_is_handed_over(clean_env: None) -> None:
    waiting = early_core.prestart(start_env.current(), preload=())
    early_core.offer(waiting)
    process = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    process.start()
    process.join(60)
    assert process.exitcode == 0 and process.pid != waiting.pid
    assert waiting.said[0].startswith("spawned afresh: not vLLM's engine core")
    assert early_core.withdraw() is None, "no engine core was spawned"


def test_an_interpreter_that_died_while_importing_is_replaced_by_a_fresh_spawn(
    tmp_path: Path, clean_env: None
) -> None:
    waiting = early_core.prestart(start_env.current(), preload=())
    os.kill(waiting.pid, 9)  # as if it crashed importing torch
    time.sleep(0.5)
    early_core.offer(waiting)
    pid = _run(tmp_path / "out.json")
    early_core.withdraw()
    assert pid != waiting.pid and json.loads((tmp_path / "out.json").read_text())["pid"] == pid
    assert waiting.said and waiting.said[0].startswith("spawned afresh: the waiting interpreter")


def test_an_interpreter_nobody_takes_is_ended(clean_env: None) -> None:
    waiting = early_core.prestart(start_env.current(), preload=())
    assert waiting.alive()
    waiting.end()
    assert not waiting.alive() and _gone(waiting.pid)


def test_vllms_changes_are_learned_per_path_and_predicted(tmp_path: Path) -> None:
    store = StartEnv(tmp_path / "env.json")
    assert store.changes("optimized:mtp") is None
    before = {"PATH": "/bin", "GONE": "x"}
    after = {"PATH": "/bin", "LD_PRELOAD": "libgomp.so.1"}
    store.record("optimized:mtp", start_env.changed(before, after))
    assert store.changes("optimized:mtp") == {"GONE": None, "LD_PRELOAD": "libgomp.so.1"}
    assert start_env.predicted(before, {"OWN": "1"}, store.changes("optimized:mtp") or {}) == {
        "PATH": "/bin",
        "OWN": "1",
        "LD_PRELOAD": "libgomp.so.1",
    }
    (tmp_path / "env.json").write_text("[not an object]")
    assert store.changes("optimized:mtp") is None, "an unreadable file is ignored"


@pytest.mark.engine
async def test_a_handed_over_engine_core_gives_the_same_tokens_as_a_spawned_one(
    tiny_source: ModelSource, gemma_home: Path, clean_env: None
) -> None:
    """The optimized path started twice: spawned as vLLM does (GEMMA_CHAT_EARLY_CORE=0; vLLM's
    variables learned from it), then handed to an interpreter started early. Same greedy tokens."""
    config = engine_config(EnginePath.optimized(), tiny_source, TEST_ENGINE)
    logs = [gemma_home / "logs" / f"early-{name}.log" for name in ("spawned", "handed")]
    engines = [VllmEngine(tiny_source, config, log_path=log) for log in logs]
    try:
        os.environ[EARLY_CORE_VARIABLE] = "0"
        with capture_stderr(logs[0]):
            await engines[0].start()
        del os.environ[EARLY_CORE_VARIABLE]
        with capture_stderr(logs[1]):
            await engines[1].start()
        assert engines[0].early_start is None and "early engine-core" not in logs[0].read_text()
        said = "the engine core went to the interpreter started early"
        assert engines[1].early_start == said and said in logs[1].read_text()
        renderer = PromptRenderer.for_model(str(tiny_source.path))
        sampling = SamplingSettings(max_tokens=32, ignore_eos=True)
        prompts = parity_prompts(tiny_source.modalities())
        requests = [p.request(renderer, sampling, tag="early-") for p in prompts]
        report = await run_parity(
            engines[0], engines[1], requests, decode=lambda t: renderer.tokenizer.decode([t])
        )
        assert report.request_fraction == 1.0 and report.position_fraction == 1.0, report.summary()
    finally:
        for engine in engines:
            await engine.shutdown()
