"""Speculation measured when the engine is idle, so that a first start answers at once.

With ``speculation = "auto"`` on a CPU and no choice kept for this model and machine, the app's
optimized engine starts without drafts and serves at once. Its measurement (``first_start.decide``:
the same short greedy requests, 0..most drafts, the same rule and budget) runs in the background
while no reply streams in this process — on any engine: the two paths share the cores — and only
after ``IDLE_S`` of quiet, one short request at a time (at most ``first_start.TOKENS`` tokens).

A reply that arrives while a measuring request runs cancels that request (the engine aborts it)
and sets the engine's drafts back to the ones it serves with: the reply waits for that abort and
one call to the engine core, never for the measurement. The measurement takes up the cancelled
request again once the engine is idle again; its budget counts only the time it held the engine.
When it has decided, the choice is kept (the next start applies it at once, as before), the engine
switches to it and says so (``settled``). ``gemma-chat ask`` answers one prompt and exits: it never
measures (``NEVER``); ``bench`` and the probes measure before they serve (``AT_START``), as their
figures are the optimized path's with its choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Literal

from backend.engine.protocol import Cancelled, EngineInfo, EngineRequest, Failed, Finished, TurnEvent
from backend.engine.speculation.choice import SpeculationChoice
from backend.engine.speculation.first_start import (
    BUDGET_S,
    DraftEngine,
    DraftPlan,
    Preempted,
    decide,
    measured_info,
    serving_steps,
    undecided,
    unmeasured_info,
    with_drafts_settled,
)
from backend.engine.speculation.kept import store_choice, stored_choice
from backend.engine.speculation.reply_check import ReplyCheck
from backend.errors import EngineDied, GemmaChatError
from backend.gemma4.messages import PromptRenderer

Measure = Literal["at start", "when idle", "never"]
AT_START: Measure = "at start"
WHEN_IDLE: Measure = "when idle"
NEVER: Measure = "never"
IDLE_S = 3.0
"""Seconds without a reply before the measurement takes the engine (a reply's tool call, or the
two halves of a compare, leave gaps shorter than this)."""
POLL_S = 0.2
PENDING = "speculation: measuring when idle"
"""The engine's speculation line until the measurement has decided (the status bar shows it)."""
NOT_MEASURED = (
    "no speculation yet: not measured on this machine (the app measures it when idle; "
    "`gemma-chat paths --measure` measures it now)"
)

RawStream = Callable[[EngineRequest], AsyncIterator[TurnEvent]]
Steps = tuple[tuple[int, int], ...]


class Replies:
    """The replies streaming in this process, and the measurements that yield the engine to them."""

    def __init__(self) -> None:
        self.streaming = 0
        self.quiet_since = time.monotonic()
        self.measurements: set[IdleMeasurement] = set()

    def quiet_for(self, seconds: float) -> bool:
        return self.streaming == 0 and time.monotonic() - self.quiet_since >= seconds

    def begin(self) -> None:
        self.streaming += 1

    async def take_back(self) -> None:
        """Every measurement of this event loop that holds an engine yields it."""
        loop = asyncio.get_running_loop()
        for measurement in [m for m in self.measurements if m.loop is loop]:
            await measurement.yield_engine()

    def end(self) -> None:
        self.streaming = max(0, self.streaming - 1)
        if self.streaming == 0:
            self.quiet_since = time.monotonic()


REPLIES = Replies()


async def reply(events: AsyncIterator[TurnEvent]) -> AsyncIterator[TurnEvent]:
    """A reply's ``events``: a measurement yields the engine before the first; the reply counts
    as streaming until its last (a consumer that stops reading there ends it)."""
    REPLIES.begin()
    streaming = True
    try:
        await REPLIES.take_back()
        async for event in events:
            if streaming and isinstance(event, Finished | Cancelled | Failed):
                REPLIES.end()
                streaming = False
            yield event
    finally:
        if streaming:
            REPLIES.end()


class IdleMeasurement:
    """One engine's measurement, run in the background; to ``decide`` it is the engine (``DraftEngine``)
    whose requests run only when idle and whose clock runs only while it holds the engine."""

    def __init__(
        self,
        engine: DraftEngine,
        raw: RawStream,
        plan: DraftPlan,
        renderer: PromptRenderer,
        *,
        idle_s: float = IDLE_S,
        budget_s: float = BUDGET_S,
    ) -> None:
        self.engine, self.raw, self.plan, self.renderer = engine, raw, plan, renderer
        self.idle_s, self.budget_s = idle_s, budget_s
        self.loop = asyncio.get_running_loop()
        self.serving: Steps = serving_steps(None, plan)
        self.holding = False
        self.preempted = False
        self.held_since = 0.0
        self.measured_s = 0.0
        self.requests = 0
        """Measuring requests run to their end."""
        self.preemptions = 0
        self._turn: asyncio.Task[list[TurnEvent]] | None = None
        self.task: asyncio.Task[SpeculationChoice | Exception] | None = None

    def begin(self) -> None:
        self.task = asyncio.ensure_future(self._measure())

    def clock(self) -> float:
        """Seconds this measurement has held the engine."""
        return self.measured_s + (time.monotonic() - self.held_since if self.holding else 0.0)

    async def _take(self) -> None:
        """Hold the engine once no reply has streamed for ``idle_s``."""
        if self.holding and not self.preempted:
            return
        while not REPLIES.quiet_for(self.idle_s):
            await asyncio.sleep(POLL_S)
        self.holding, self.preempted, self.held_since = True, False, time.monotonic()
        REPLIES.measurements.add(self)  # a reply now takes the engine back from it

    def _release(self) -> None:
        if self.holding:
            self.measured_s += time.monotonic() - self.held_since
        self.holding = False

    async def set_drafts(self, drafts: int, up_to: int, then: Steps = ()) -> None:
        await self._take()
        await self.engine.set_drafts(drafts, up_to, then)

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        if self.preempted or not self.holding:
            raise Preempted
        turn = self._turn = asyncio.ensure_future(self._collect(request))
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:  # the budget ended: the request ends with it
            turn.cancel()
            await asyncio.wait({turn})
            raise
        finally:
            self._turn = None
        if turn.cancelled():
            raise Preempted
        self.requests += 1
        for event in turn.result():
            yield event

    async def _collect(self, request: EngineRequest) -> list[TurnEvent]:
        return [event async for event in self.raw(request)]

    async def yield_engine(self) -> None:
        """A reply begins: cancel the measuring request (the engine aborts it) and set back the
        drafts the engine serves with."""
        if not self.holding:
            return
        self.preempted = True
        self.preemptions += 1
        self._release()
        if self._turn is not None:
            self._turn.cancel()
            await asyncio.wait({self._turn})
        first, *then = self.serving
        with contextlib.suppress(GemmaChatError, RuntimeError):  # a dead engine: the reply says so
            await self.engine.set_drafts(first[1], first[0], tuple(then))

    async def _measure(self) -> SpeculationChoice | Exception:
        """Decide, keep and apply: the choice; or why measuring failed (no drafts then)."""
        try:
            choice = await decide(self, self.plan, self.renderer, budget_s=self.budget_s, clock=self.clock)
            if not undecided(choice):
                store_choice(self.plan.key, choice)
            self.serving = serving_steps(choice, self.plan)
            self._release()
            first, *then = self.serving
            await self.engine.set_drafts(first[1], first[0], tuple(then))
            return choice
        except EngineDied as error:
            return error
        except (GemmaChatError, RuntimeError) as error:
            self.serving = serving_steps(None, self.plan)
            return error
        finally:
            self._release()
            REPLIES.measurements.discard(self)

    async def settled(self, info: EngineInfo) -> tuple[EngineInfo, ReplyCheck | None]:
        """``info`` once the measurement has ended: naming the choice applied, or why none was."""
        if self.task is None:
            raise RuntimeError("settled() before the measurement was started")
        outcome = await self.task
        if isinstance(outcome, SpeculationChoice):
            return measured_info(info, self.plan, outcome)
        if isinstance(outcome, EngineDied):
            return info, None
        return unmeasured_info(info, outcome), None

    def cancel(self) -> None:
        REPLIES.measurements.discard(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()


async def drafts_at_start(
    engine: DraftEngine,
    raw: RawStream,
    info: EngineInfo,
    plan: DraftPlan,
    renderer: PromptRenderer,
    say: Callable[[str], None],
    measure: Measure,
) -> tuple[EngineInfo, ReplyCheck | None, IdleMeasurement | None]:
    """A started engine's drafts: the choice kept for this model and machine, applied at once;
    with none kept, measured now (``AT_START``), or no drafts until a measurement when idle has
    decided (``WHEN_IDLE``: it is returned, begun), or no drafts (``NEVER``)."""
    kept = stored_choice(plan.key)  # read once for this start
    if measure == AT_START or kept is not None:
        settled, check = await with_drafts_settled(engine, info, plan, renderer, say, kept)
        return settled, check, None
    first, *then = serving_steps(None, plan)
    await engine.set_drafts(first[1], first[0], tuple(then))
    if measure == NEVER:
        return replace(info, speculation=NOT_MEASURED), None, None
    measurement = IdleMeasurement(engine, raw, plan, renderer)
    measurement.begin()
    return replace(info, speculation=PENDING), None, measurement
