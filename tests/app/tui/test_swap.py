"""Both paths on a device that holds one engine: the pool swaps engines (sleep where the engine can,
else stop and start), F2 and compare work, and a compare's figures are each path's own.

The fakes here stand in for the UI flow; the real-engine test at the end swaps two vLLM CPU
engines (stop one, start the other) and checks their tokens."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.tui.app import GemmaChatApp
from app.tui.widgets.compare_view import CompareView
from backend.config.settings import Settings
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.session.pool import EnginePool
from tests.support.fake_engine import FakeEngine
from tests.support.tui_pilot import replies, send, wait_until

pytestmark = (
    pytest.mark.second_lane
)  # python3 -m tests: an engine test of the second lane (tests/__main__.py)


@dataclass
class Device:
    """Which fake engines hold the device now; the most that ever did at once."""

    up: set[str] = field(default_factory=set)
    most: int = 0
    log: list[str] = field(default_factory=list)

    def on(self, name: str) -> None:
        self.up.add(name)
        self.most = max(self.most, len(self.up))
        self.log.append(f"+{name}")

    def off(self, name: str) -> None:
        self.up.discard(name)
        self.log.append(f"-{name}")


@dataclass
class DeviceEngine(FakeEngine):
    device: Device = field(default_factory=Device)
    starts: int = 0

    async def start(self, progress: Any = None) -> Any:
        info = await super().start(progress)
        self.starts += 1
        self.device.on(self.path)
        return info

    async def stream(self, request: EngineRequest) -> Any:
        assert self.device.up == {self.path}, f"{self.path} streamed beside {self.device.up}"
        async for event in super().stream(request):
            yield event

    async def shutdown(self) -> None:
        await super().shutdown()
        self.device.off(self.path)


@dataclass
class SleepyEngine(DeviceEngine):
    can_sleep: bool = True
    sleeps: int = 0

    async def sleep(self) -> None:
        self.sleeps += 1
        self.device.off(self.path)

    async def wake_up(self) -> None:
        self.device.on(self.path)


def _request(rid: str) -> EngineRequest:
    return EngineRequest(rid, "hello there", sampling=SamplingSettings(max_tokens=8, temperature=0.0))


async def _finish(engine: Any, rid: str) -> Finished:
    events = [event async for event in engine.stream(_request(rid))]
    assert isinstance(events[-1], Finished)
    return events[-1]


@pytest.mark.parametrize("kind", [DeviceEngine, SleepyEngine])
async def test_the_pool_keeps_one_engine_on_the_device(kind: type[DeviceEngine]) -> None:
    device = Device()
    made: dict[str, DeviceEngine] = {}

    def factory(path: str) -> DeviceEngine:
        return made.setdefault(path, kind(path, device=device))

    pool = EnginePool(factory, swapping=lambda: True)
    optimized = await pool.ensure("optimized")
    baseline = await pool.ensure("baseline")  # never started: swapped in now
    assert device.up == {"baseline"}
    assert pool.state("optimized").stage == ("asleep" if kind is SleepyEngine else "stopped")
    again = await pool.ensure("optimized")  # started before: handed out, swaps in for its request
    assert device.up == {"baseline"} and again.info == optimized.info
    await _finish(optimized.engine, "a")
    await _finish(baseline.engine, "b")
    await _finish(baseline.engine, "c")  # resident already: no swap
    assert device.most == 1
    if kind is SleepyEngine:
        assert made["optimized"].starts == 1 and made["optimized"].sleeps == 2  # out, in, out again
    else:
        assert made["optimized"].starts == 2 and made["baseline"].starts == 2
    await pool.shutdown()


async def test_a_swapped_path_renders_with_its_own_engine_and_the_wrapper_forwards_no_attribute() -> None:
    """The handle carries the engine that renders (``PathEngine.prompts``); ``ResidentEngine`` and
    ``DeferredEngine`` forward by name nothing beyond their explicit methods."""
    from backend.engine.session.factory import DeferredEngine
    from backend.engine.session.swap import ResidentEngine

    device = Device()
    made: dict[str, DeviceEngine] = {}
    pool = EnginePool(
        lambda path: made.setdefault(path, DeviceEngine(path, device=device)), swapping=lambda: True
    )
    optimized = await pool.ensure("optimized")
    assert isinstance(optimized.engine, ResidentEngine) and optimized.prompts is made["optimized"]
    for wrapper in (ResidentEngine, DeferredEngine):
        assert not hasattr(wrapper, "__getattr__"), f"{wrapper.__name__} forwards by __getattr__"
    assert not hasattr(optimized.engine, "requests"), "the fake's own attribute stays its own"
    await pool.shutdown()


async def test_a_request_waits_for_the_running_one_before_swapping() -> None:
    device = Device()
    made: dict[str, DeviceEngine] = {}
    pool = EnginePool(
        lambda p: made.setdefault(p, DeviceEngine(p, device=device, delay_s=0.02)), lambda: True
    )
    optimized = await pool.ensure("optimized")
    baseline = await pool.ensure("baseline")
    await asyncio.gather(_finish(optimized.engine, "x"), _finish(baseline.engine, "y"))
    assert device.most == 1


def _swapping_app(tmp_path: Path, device: Device) -> tuple[GemmaChatApp, dict[str, DeviceEngine]]:
    engines: dict[str, DeviceEngine] = {}

    def factory(path: str) -> DeviceEngine:
        return engines.setdefault(path, DeviceEngine(path, device=device, start_delay_s=0.05))

    settings = Settings(data_dir=tmp_path)
    return GemmaChatApp(settings, factory, "fake-model", swapping=lambda: True), engines


async def test_f2_and_compare_swap_engines_in_the_app(tmp_path: Path) -> None:
    device = Device()
    app, engines = _swapping_app(tmp_path, device)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.pool.state("optimized").ready)
        await pilot.press("f2")  # swaps now: the optimized engine stops, the baseline starts
        await wait_until(pilot, lambda: app.pool.state("baseline").ready)
        assert device.up == {"baseline"} and app.pool.state("optimized").stage == "stopped"
        assert "swap mode" in app.status.engine_detail
        await send(app, pilot, "Which path?")
        assert replies(app)[-1].path == "baseline"
        await pilot.press("f2", "f3")
        await send(app, pilot, "Compare this")
        view = app.query_one(CompareView)
        assert view.panes["baseline"].text == view.panes["optimized"].text != ""
        verdict = str(view.query_one(".verdict").render())
        # each path's own figures (the fakes decode at 40 and 100 tok/s): no swap in them
        assert "decode 2.50x" in verdict and "identical (" in verdict
        assert device.most == 1
    assert engines["optimized"].starts >= 2


async def test_a_swapped_compare_runs_the_engine_on_the_device_first(tmp_path: Path) -> None:
    """A compare swaps once, not twice: the path whose engine is on the device runs first (the
    chat's alternation would have started the other, then swapped back)."""
    device = Device()
    app, engines = _swapping_app(tmp_path, device)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.pool.state("optimized").ready)
        await pilot.press("f3")
        await send(app, pilot, "Compare this")  # baseline started, then optimized again
        assert (engines["baseline"].starts, engines["optimized"].starts) == (1, 2)
        await pilot.press("f2")  # the baseline path: its engine swaps in now
        await wait_until(pilot, lambda: app.pool.state("baseline").ready)
        await send(app, pilot, "Which path?")
        assert (engines["baseline"].starts, engines["optimized"].starts) == (2, 2)
        await pilot.press("f3")  # the chat's second compare would start with the optimized path
        await send(app, pilot, "Compare again")
        assert (engines["baseline"].starts, engines["optimized"].starts) == (2, 3), "one swap"
        assert device.most == 1
        views = list(app.query(CompareView))
        assert views[-1].panes["baseline"].text == views[-1].panes["optimized"].text != ""


async def test_the_status_bar_shows_the_swap(tmp_path: Path) -> None:
    device = Device()
    engines: dict[str, DeviceEngine] = {}

    def factory(path: str) -> DeviceEngine:
        return engines.setdefault(path, DeviceEngine(path, device=device, start_delay_s=1.5))

    app = GemmaChatApp(Settings(data_dir=tmp_path), factory, "fake-model", swapping=lambda: True)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.pool.state("optimized").ready)
        await pilot.press("f2")
        seen: list[str] = []
        for _ in range(100):
            await pilot.pause(0.05)
            app._tick()
            seen.append(app.status.figures().line(120))
            if app.pool.state("baseline").ready:
                break
        assert any("engine [b]swapping (starting baseline)[/b]" in s for s in seen), seen


@pytest.mark.engine
async def test_real_cpu_engines_swap_by_stopping_and_starting(tiny_source: Any, gemma_home: Path) -> None:
    """Two vLLM CPU engines (eager, to keep the three starts short) behind a swapping pool: only one
    runs at a time, the stopped one starts again for its next request, and greedy tokens agree."""
    from backend.engine.local.log import capture_stderr
    from backend.engine.local.vllm import VllmEngine
    from backend.engine.paths.engine_args import EnginePath, engine_config
    from tests.conftest import TEST_ENGINE

    log = gemma_home / "logs" / "swap-engines.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    made: dict[str, VllmEngine] = {}

    def factory(path: str) -> VllmEngine:
        config = engine_config(EnginePath.eager(), tiny_source, TEST_ENGINE)
        return made.setdefault(path, VllmEngine(tiny_source, config, log_path=log))

    pool = EnginePool(factory, swapping=lambda: True)
    with capture_stderr(log):
        try:
            optimized = await pool.ensure("optimized")
            first = await _finish(optimized.engine, "swap-1")
            baseline = await pool.ensure("baseline")
            assert made["baseline"].started and not made["optimized"].started
            assert pool.state("optimized").stage == "stopped"
            second = await _finish(baseline.engine, "swap-2")
            third = await _finish(optimized.engine, "swap-3")  # swaps back: baseline stopped
            assert made["optimized"].started and not made["baseline"].started
        finally:
            await pool.shutdown()
    assert first.token_ids == second.token_ids == third.token_ids and first.token_ids
    assert third.metrics.e2e_s is not None and third.metrics.e2e_s < 30  # the restart is not in it


def test_the_status_bar_says_when_a_gpu_path_has_no_drafter() -> None:
    from backend.engine.session.swap import path_note

    gpu = {"gpu_memory_utilization": 0.85}
    assert path_note("optimized", gpu, False) == "no drafter: no speculation (gemma-chat paths)"
    assert path_note("optimized", {**gpu, "speculative_config": {}}, True) == "swap mode"
    assert path_note("baseline", gpu, False) == "" and path_note("optimized", {}, False) == ""
    measured = "MTP ×3, measured 1.31x here (1.30–1.34; first start)"
    assert path_note("optimized", {}, False, measured) == "MTP ×3, measured 1.31x here"


async def test_ask_compare_says_a_swap_sleeps_the_engine_where_it_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 66: on a card the Swapper puts the baseline's engine to sleep, so ask's compare line
    and its progress say so (they said "stops" whatever the swap did)."""
    from app.commands import ask

    class Stand:
        def __init__(self, sleeps: bool) -> None:
            self.can_sleep = sleeps

        async def start(self, progress: object = None) -> object:
            return object()

    async def no_warm_up(engine: object) -> None:
        return None

    monkeypatch.setattr(ask, "warm_up", no_warm_up)
    for sleeps, said, state in (
        (True, "puts its engine to sleep", "asleep"),
        (False, "stops its engine", "stopped"),
    ):
        engines: dict[str, Any] = {"baseline": Stand(sleeps), "optimized": Stand(sleeps)}
        assert ask.swap_how(engines).startswith(said)
        shown: list[str] = []
        start = ask.swapped_engines(engines, shown.append)["baseline"].swapper._start  # type: ignore[attr-defined]
        await start("baseline")
        await start("optimized")
        assert "(the other is" not in shown[0]
        assert shown[1].endswith(f"(the other is {state}: one fits in memory)…"), shown
