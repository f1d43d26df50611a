"""Speculation measured when the engine is idle (``when_idle``): a reply never waits for the
measurement and never streams beside one of its requests; an interrupted measurement resumes and,
once decided, is kept and applied. On a stand-in engine with the demo's recorded figures; the real
engine's turn is in tests/engine/speculation/test_first_start_engine.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource
from backend.engine.protocol import EngineInfo, EngineRequest, Finished, Started, TurnEvent
from backend.engine.speculation import when_idle
from backend.engine.speculation.first_start import DECISION_ENV, DraftPlan
from backend.engine.speculation.kept import store_choice, stored_choice
from backend.gemma4.messages import PromptRenderer
from tests.engine.speculation.test_first_start_drafts import RECORDED, RECORDED_HISTOGRAMS


@dataclass
class Shared:
    """Answers as the demo did at each count of drafts; logs when each request ran, by kind."""

    drafts: int = 0
    slow_s: float = 0.0
    """How long a measuring request takes (a reply's own time is its ``reply_s``)."""
    log: list[tuple[float, str, str]] = field(default_factory=list)
    running: dict[str, str] = field(default_factory=dict)
    drafts_at_reply: list[int] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)

    async def set_drafts(self, drafts: int, up_to: int, then: tuple[tuple[int, int], ...] = ()) -> None:
        await asyncio.sleep(0.001)  # a call to the engine core
        self.drafts = drafts

    async def raw(self, request: EngineRequest, reply_s: float = 0.0) -> AsyncIterator[TurnEvent]:
        kind = "measure" if request.request_id.startswith("decide-") else "reply"
        if kind == "reply":
            self.drafts_at_reply.append(self.drafts)
        self.running[request.request_id] = kind
        self.log.append((time.monotonic(), f"{kind} begins", request.request_id))
        try:
            yield Started(request.request_id)
            await asyncio.sleep(self.slow_s if kind == "measure" else reply_s)
        except asyncio.CancelledError:
            self.aborted.append(request.request_id)
            raise
        finally:
            del self.running[request.request_id]
            self.log.append((time.monotonic(), f"{kind} ends", request.request_id))
        rate = RECORDED[self.drafts] * (1 + (len(request.prompt) % 4) / 100)
        histogram = RECORDED_HISTOGRAMS.get(self.drafts) if self.drafts else None
        metrics = TurnMetrics(generated_tokens=64, decode_tokens_per_s=rate, acceptance_histogram=histogram)
        yield Finished(request.request_id, "x", (1, 2, 3), metrics, "length")

    def overlaps(self) -> list[str]:
        """Request ids that began while a request of the other kind ran."""
        running: dict[str, str] = {}
        found = []
        for _, what, rid in self.log:
            kind, edge = what.split()
            if edge == "begins":
                if any(other != kind for other in running.values()):
                    found.append(rid)
                running[rid] = kind
            else:
                running.pop(rid, None)
        return found


@pytest.fixture(scope="module")
def renderer(tiny_source: ModelSource) -> PromptRenderer:
    return PromptRenderer.for_model(str(tiny_source.path))


async def _reply(engine: Shared, rid: str, reply_s: float) -> tuple[float, Finished]:
    """A user's reply through the gate: seconds to its first event, and its last."""
    asked = time.monotonic()
    first: float | None = None
    final = None
    request = EngineRequest(rid, "<user>hello")
    async for event in when_idle.reply(engine.raw(request, reply_s)):
        first = first if first is not None else time.monotonic() - asked
        final = event
    assert isinstance(final, Finished) and first is not None
    return first, final


async def _until(check, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_a_reply_is_not_delayed_by_the_measurement_which_never_runs_beside_it(
    renderer: PromptRenderer, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DECISION_ENV, "rates")
    plan = DraftPlan("mtp", 4, "key-when-idle", 4)
    engine = Shared(slow_s=2.0)
    measurement = when_idle.IdleMeasurement(engine, engine.raw, plan, renderer, idle_s=0.2)
    measurement.begin()
    try:
        # a measuring request (2 s) is under way: the reply that arrives now waits for no part of it
        await _until(lambda: "measure" in engine.running.values())
        latency, _ = await _reply(engine, "reply-1", 0.3)
        assert latency < 0.5, f"the reply waited {latency:.2f} s (a measuring request takes 2 s)"
        assert engine.aborted and engine.aborted[0].startswith("decide-"), "that request was cancelled"
        assert engine.drafts_at_reply == [0], "the reply ran with the drafts the engine serves with"
        # replies in a row: the measurement waits for idle_s of quiet after each
        engine.slow_s = 0.005
        for n in range(3):
            await asyncio.sleep(0.05)
            await _reply(engine, f"reply-{n + 2}", 0.1)
        assert measurement.task is not None
        choice = await asyncio.wait_for(measurement.task, 30)
    finally:
        measurement.cancel()
    assert engine.overlaps() == [], "no measuring request ever ran while a reply streamed"
    ends = [t for t, what, _ in engine.log if what == "reply ends"]
    resumed = [t for t, what, _ in engine.log if what == "measure begins" and t > ends[-1]]
    assert resumed and resumed[0] - ends[-1] >= 0.2, "resumed only after idle_s of quiet"
    first_reply = next(t for t, what, _ in engine.log if what == "reply ends")
    again = [t for t, what, rid in engine.log if what == "measure begins" and rid == engine.aborted[0]]
    assert measurement.preemptions >= 1 and any(t > first_reply for t in again), "it ran again later"
    assert not isinstance(choice, Exception) and (choice.method, choice.drafts) == ("mtp", 2), choice
    assert stored_choice(plan.key) == choice, "kept: the next start applies it at once"
    assert engine.drafts == 2, "the engine switched to the measured choice"
    info = EngineInfo("demo", 4096, frozenset({"text"}), {}, speculation=when_idle.PENDING)
    settled, _ = await measurement.settled(info)
    assert settled.speculation == choice.verdict() and settled.speculation.startswith("MTP ×2, measured")
    store_choice(plan.key, None)


async def test_a_reply_during_the_measurements_call_to_the_engine_core_runs_on_the_served_drafts(
    renderer: PromptRenderer, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measurement set 4 drafts, a reply began before its request did: the reply runs on the
    served drafts (none) and the measuring request runs later, after setting its drafts again."""
    monkeypatch.setenv(DECISION_ENV, "rates")
    plan = DraftPlan("mtp", 4, "key-when-idle-race", 4)
    engine = Shared()
    measurement = when_idle.IdleMeasurement(engine, engine.raw, plan, renderer, idle_s=0.05)
    await measurement.set_drafts(4, 4)
    assert engine.drafts == 4 and measurement.holding
    await _reply(engine, "reply-race", 0.01)
    assert engine.drafts_at_reply == [0] and not measurement.holding
    with pytest.raises(when_idle.Preempted):
        [event async for event in measurement.stream(EngineRequest("decide-x", "p"))]
    assert "decide-x" not in [rid for _, _, rid in engine.log], "never sent: it runs again when idle"
    measurement.cancel()


def test_the_pending_line_fits_the_status_bar_of_a_110_column_terminal() -> None:
    from app.tui.widgets.status_bar import StatusFigures
    from backend.engine.session.swap import path_note

    detail = path_note("optimized", {}, False, when_idle.PENDING)
    figures = StatusFigures("demo (10M Gemma 4)", "optimized", "ready", detail, 0, 4096, False)
    plain = figures.line(110).replace("[b]", "").replace("[/b]", "")
    assert "engine ready (speculation: measuring when idle)" in plain and len(plain) <= 110, plain


async def test_the_app_answers_while_pending_then_says_the_measured_choice(tmp_path: Path) -> None:
    """The status bar reads the pending line while the engine measures when idle, a message is
    answered meanwhile, and once the choice is applied the bar names it and a notice says so."""
    from tests.support.fake_engine import FakeEngine
    from tests.support.tui_pilot import make_app, replies, send, wait_until_streaming

    measured = asyncio.Event()
    verdict = "MTP ×3, measured 1.79x here (1.60–1.90; first start)"

    @dataclass
    class MeasuringWhenIdle(FakeEngine):
        async def start(self, progress=None):  # type: ignore[no-untyped-def]
            self.info = replace(await super().start(progress), speculation=when_idle.PENDING)
            return self.info

        async def measured_info(self) -> EngineInfo:
            await measured.wait()
            return replace(self.info, speculation=verdict)

    app, _ = make_app(tmp_path, lambda path: MeasuringWhenIdle(path))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until_streaming(pilot, lambda: app.status.engine == "ready")
        assert app.status.engine_detail == when_idle.PENDING
        await send(app, pilot, "Hello before the measurement")
        assert replies(app)[0].text.startswith("Hello"), "answered while the measurement is pending"
        measured.set()
        await wait_until_streaming(pilot, lambda: app.status.engine_detail == "MTP ×3, measured 1.79x here")
        notes = [str(n.message) for n in app._notifications]
        assert any(f"speculation measured when idle: {verdict}; applied from now on" in n for n in notes), (
            notes
        )


async def test_a_start_with_a_kept_choice_reads_it_once(
    renderer: PromptRenderer, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept choice is read once per start (when_idle's check, then applied as read)."""
    from backend.engine.speculation import first_start
    from backend.engine.speculation.choice import SpeculationChoice

    plan = DraftPlan("mtp", 4, "key-read-once", 4)
    engine = Shared()
    kept = SpeculationChoice("mtp", 2, 1.5, 1.5, 1.5, (), measured_by="first start")
    store_choice(plan.key, kept)
    reads: list[str] = []

    def counted(key: str) -> object:
        reads.append(key)
        return stored_choice(key)

    monkeypatch.setattr(when_idle, "stored_choice", counted)
    monkeypatch.setattr(first_start, "stored_choice", counted)
    info = EngineInfo("m", 4096, frozenset({"text"}), {})
    settled, _, pending = await when_idle.drafts_at_start(
        engine, engine.raw, info, plan, renderer, lambda _: None, when_idle.WHEN_IDLE
    )
    assert reads == ["key-read-once"] and pending is None and settled.speculation
    assert engine.drafts == first_start.serving_steps(kept, plan)[0][1]
