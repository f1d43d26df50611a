"""Compare mode: the same request on the baseline and the optimized path, one after the other
(so neither steals the other's cores), then the speed-up and the token-parity verdict."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from backend.engine import Cancelled, Engine, EngineRequest, Failed, Finished, TurnEvent
from backend.parity import TokenParity, compare_tokens


@dataclass(frozen=True)
class CompareResult:
    baseline: Finished
    optimized: Finished
    parity: TokenParity

    @property
    def decode_speedup(self) -> float | None:
        base, opt = self.baseline.metrics.decode_tokens_per_s, self.optimized.metrics.decode_tokens_per_s
        return opt / base if base and opt else None

    @property
    def e2e_speedup(self) -> float | None:
        base, opt = self.baseline.metrics.e2e_s, self.optimized.metrics.e2e_s
        return base / opt if base and opt else None

    def summary(self) -> str:
        decode = f"{self.decode_speedup:.2f}x" if self.decode_speedup else "n/a"
        e2e = f"{self.e2e_speedup:.2f}x" if self.e2e_speedup else "n/a"
        return f"speed-up: decode {decode}, end-to-end {e2e} · parity: {self.parity.describe()}"


@dataclass(frozen=True)
class PathEvent:
    """An event of one path during a comparison."""

    path: str
    event: Any
    """A ``TurnEvent``, or a tool event when the turn calls tools."""


TurnRunner = Callable[[str, Engine], AsyncIterator[Any]]
"""Runs the turn on one path; it ends with ``Finished``, ``Cancelled`` or ``Failed``."""


async def compare_stream(
    baseline: Engine,
    optimized: Engine,
    request: EngineRequest,
    decode: Callable[[int], str] | None = None,
    run_turn: TurnRunner | None = None,
) -> AsyncIterator[PathEvent | CompareResult]:
    """Yields every event of both paths (baseline first), then one ``CompareResult`` if both finished.

    ``run_turn`` replaces the single request (a tool-calling turn has several); the default
    streams ``request`` with a per-path request id."""

    def single(path: str, engine: Engine) -> AsyncIterator[TurnEvent]:
        return engine.stream(replace(request, request_id=f"{path}-{request.request_id}"))

    finals: dict[str, TurnEvent] = {}
    for path, engine in (("baseline", baseline), ("optimized", optimized)):
        async for event in (run_turn or single)(path, engine):
            yield PathEvent(path, event)
            if isinstance(event, Finished | Cancelled | Failed):
                finals[path] = event
        if not isinstance(finals.get(path), Finished):
            return
    base, opt = finals["baseline"], finals["optimized"]
    assert isinstance(base, Finished) and isinstance(opt, Finished)
    yield CompareResult(base, opt, compare_tokens(base.token_ids, opt.token_ids, decode))
