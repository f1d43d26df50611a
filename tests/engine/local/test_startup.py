"""Engine start-up: its stages from the clock and the engine log, the last start's duration for the
status bar, ``bench --startup``'s runs, and the compile-cache load on the CPU build."""

from __future__ import annotations

import argparse
import inspect
import time
from dataclasses import replace
from pathlib import Path

from app.commands.bench_startup import ask_command, table
from backend.engine.local.startup import StartClock, log_marks, timings
from backend.engine.session.pool import EngineState
from backend.engine.session.start_history import StartHistory

INIT_ENGINE = "init engine (profile, create kv cache, warmup model)"


def _stamp(epoch: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(epoch))


def _log(t0: float, loaded: bool) -> str:
    core = "(EngineCore pid=7) INFO"
    middle = (
        f"{core} {_stamp(t0 + 9)} [decorators.py:319] [backbone] Directly load AOT compilation from path /x"
        if loaded
        else f"{core} {_stamp(t0 + 30)} [decorators.py:743] [backbone] saved AOT compiled function to /x"
    )
    done = t0 + (10 if loaded else 31)
    return "\n".join(
        [
            f"{core} {_stamp(t0 - 20)} [cpu_model_runner.py:87] Warming up model for the compilation...",
            f"{core} {_stamp(t0 + 2)} [core.py:133] Initializing a V1 LLM engine (v0.32.0)",
            f"{core} {_stamp(t0 + 7)} [cpu_model_runner.py:87] Warming up model for the compilation...",
            middle,
            f"{core} {_stamp(done)} [cpu_model_runner.py:91] Warming up done.",
            "Loading safetensors checkpoint shards: 100% Completed",
            f"{core} {_stamp(done + 4)} [core.py:402] {INIT_ENGINE} took 9.9 s",
        ]
    )


def test_a_starts_stages_run_end_to_end_from_the_launch_to_the_first_token() -> None:
    t0 = float(int(time.time()))  # whole seconds, as the log stamps them
    clock = StartClock(launched=t0 - 6.5, began=t0 - 6.0)
    clock.marks = [("imports", t0), ("engine", t0 + 14.5), ("warm-up", t0 + 15.0), ("first token", t0 + 15.1)]
    result = timings(clock, _log(t0, loaded=True))
    stages = {s.name: round(s.seconds, 2) for s in result.stages}
    assert stages == {
        "imports": 6.5,
        "engine core": 7.0,
        "cache load": 3.0,
        "KV cache": 4.0,
        "hand-over": 0.5,
        "warm-up": 0.5,
        "first token": 0.1,
    }, "the log line from before this start (t0 - 20) is not taken"
    assert round(result.total_s, 1) == 21.6
    assert result.line().startswith("startup 21.6 s to the first token: imports 6.5 s · engine core 7.0 s")
    clock.marks = [("imports", t0), ("engine", t0 + 36.0)]
    compiled = timings(clock, _log(t0, loaded=False))
    assert [(s.name, s.seconds) for s in compiled.stages][2:] == [
        ("compile", 24.0),
        ("KV cache", 4.0),
        ("hand-over", 1.0),
    ]


def test_stages_without_log_marks_fold_into_the_next() -> None:
    t0 = time.time()
    clock = StartClock(launched=t0 - 2, began=t0 - 1)
    clock.marks = [("imports", t0), ("engine", t0 + 3), ("warm-up", t0 + 4)]
    assert [s.name for s in timings(clock, "no vLLM lines here").stages] == [
        "imports",
        "hand-over",
        "warm-up",
    ]
    assert log_marks("", t0) == []


def test_the_status_bar_expects_the_last_starts_duration(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "starts.json")
    assert history.expected_s("demo:optimized") is None
    history.record("demo:optimized", 21.24)
    history.record("demo:baseline", 30.0)
    assert history.expected_s("demo:optimized") == 21.2
    state = EngineState("optimized", "starting", "warming up", started_at=100.0, expected_s=21.2)
    assert state.elapsed_label(112.4) == "starting 12s of ~21s"
    assert EngineState("optimized", "starting", started_at=100.0).elapsed_label(103.0) == "starting 3s"
    (tmp_path / "starts.json").write_text("not json")
    assert StartHistory(tmp_path / "starts.json").expected_s("demo:optimized") is None, "ignored, not fatal"


def test_bench_startup_launches_ask_with_the_model_flags_and_tabulates_warm_runs() -> None:
    args = argparse.Namespace(demo=True, path="baseline", dtype=None, kv_cache_gib=1, model=None)
    command = ask_command(args)
    assert command[1:4] == ["-m", "app.cli", "ask"]
    assert command[4:] == [
        "--demo", "--path", "baseline", "--kv-cache-gib", "1",
        "--no-tools", "--max-tokens", "8", "--json", "--timings", "Hello",
    ]  # fmt: skip
    runs = [
        ("cold", {"imports": 6.0, "compile": 30.0, "total": 50.0}),
        ("warm 1", {"imports": 5.0, "cache load": 3.0, "total": 16.0}),
        ("warm 2", {"imports": 7.0, "cache load": 2.0, "total": 14.0}),
    ]
    lines = table(runs).splitlines()
    assert lines[0].split()[:4] == ["stage", "(s)", "cold", "warm"]
    total = next(line for line in lines if line.startswith("total"))
    assert total.split()[1:4] == ["50.0", "16.0", "14.0"] and total.endswith("15.0 (14.0-16.0)")
    assert next(line for line in lines if line.startswith("compile")).endswith("-")
    assert [line.split()[0] for line in lines[1:]] == ["imports", "compile", "cache", "total"], (
        "in start order"
    )


def test_the_compile_cache_loads_on_the_cpu_build() -> None:
    """vLLM finalizes a loaded artifact with a method only its own backend's has; torch's inductor
    artifact (what a CPU compiles to) gets one that does nothing
    (backend.compat.dependencies.aot_cache_load)."""
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable
    from vllm.compilation import decorators

    assert "compiled_fn.finalize_loading(" in inspect.getsource(decorators._try_load_aot_compiled_fn)
    assert "finalize_loading" in vars(BundledAOTAutogradSerializableCallable)
    artifact = BundledAOTAutogradSerializableCallable.__new__(BundledAOTAutogradSerializableCallable)
    artifact.compiled_fn = lambda *a: a
    assert artifact.finalize_loading(object()) is None


async def test_a_speculation_measured_when_idle_follows_ready_and_is_said_when_applied(
    tmp_path: Path,
) -> None:
    """The optimized CPU path's first start is ready before its speculation is measured (the
    measurement runs when idle, ``when_idle``): the start's duration leaves it out, and once it is
    applied the pool says the engine is ready again with the measured verdict, and hands that out."""
    import asyncio

    from backend.engine.protocol import EngineInfo
    from backend.engine.session.pool import SETTLED, EnginePool
    from backend.engine.speculation.when_idle import PENDING
    from tests.support.fake_engine import FakeEngine

    measured = asyncio.Event()

    class MeasuringWhenIdle(FakeEngine):
        async def start(self, progress=None):  # type: ignore[no-untyped-def]
            await asyncio.sleep(0.2)
            self.info = replace(await super().start(progress), speculation=PENDING)
            return self.info

        async def measured_info(self) -> EngineInfo:
            await measured.wait()  # the measurement, when idle
            return replace(self.info, speculation="MTP ×2, measured 1.31x here (1.30–1.33; first start)")

    history = StartHistory(tmp_path / "starts.json")
    pool = EnginePool(lambda path: MeasuringWhenIdle(path), model="e2b", history=history)
    states: list[EngineState] = []
    pool.listen(states.append)
    first = await pool.ensure("optimized")
    assert first.info.speculation == PENDING and states[-1].ready, "served before any measurement"
    await asyncio.sleep(0.6)
    expected = history.expected_s("e2b:optimized")
    assert expected is not None and 0.15 <= expected < 0.5, expected
    measured.set()
    await asyncio.sleep(0.05)
    assert states[-1].ready and states[-1].detail == SETTLED and states[-1].info is not None
    assert states[-1].info.speculation is not None and states[-1].info.speculation.startswith("MTP ×2")
    assert (await pool.ensure("optimized")).info.speculation == states[-1].info.speculation
    await pool.shutdown()
