"""How the optimized path's drafts fall as more requests run at once, measured on its engine.

A verifying step reads the weights once for ``1 + k`` tokens a request: with few requests the
machine waits on memory and drafts come almost free, with many it is compute-bound and each
rejected draft is work thrown away. Where that turns is a property of the card (or CPU), the
model and the drafter's acceptance, so ``profiles --measure`` measures it after choosing the
drafts for one request: on the optimized engine itself, at each of a few concurrency levels
(``LEVELS_GPU`` / ``LEVELS_CPU``, up to the engine's batch limit), ``level`` requests at once with
``k``, 1 and 0 drafts a step in turn (set through the engine core, ``backend.compat.draft_schedule``),
for ``rounds`` rounds; a count's figure at a level is the median of its aggregate tokens/s.

The rule (``choose_by_load``), level by level from the lowest: the fastest count whose greedy
tokens are no drafts' at that level, where a count with more drafts must beat the one with fewer
in every round and by ``MIN_GAIN`` on the median of the rounds' ratios to be preferred (one noisy
round does not decide); drafts never rise with load (a level's count is at most the
previous level's). The result is a schedule of steps ``(up_to, drafts)``: ``drafts`` a step up to
``up_to`` running requests (the highest level that chose it), none above the last step. The
optimized path applies it (vLLM's ``num_speculative_tokens_per_batch_size``) in place of the
estimated thresholds. Tokens cannot move with it: drafts only decide how many tokens a step may
accept, and a count that changed a token at some level is not chosen there.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from backend.engine.platform import on_gpu
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.speculation.choice import MIN_GAIN
from backend.errors import GemmaChatError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from backend.engine.model_source import ModelSource
    from backend.engine.profiles import EngineConfig
    from backend.engine.protocol import TurnEvent
    from backend.engine.speculation.choice import SpeculationChoice
    from backend.gemma4.messages import PromptRenderer

LEVELS_GPU = (1, 4, 16, 64, 256)
LEVELS_CPU = (1, 2, 4, 8)
TOKENS = 48
ROUNDS = 3
Steps = tuple[tuple[int, int], ...]
"""``((up_to, drafts), ...)``: ``drafts`` a step up to ``up_to`` running requests; none above the last."""


class LoadEngine(Protocol):
    """What the measuring needs of an engine (``VllmEngine``)."""

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]: ...

    async def set_drafts(self, drafts: int, up_to: int, then: Steps = ()) -> None: ...


@dataclass
class LoadLevel:
    """One concurrency level's figures: aggregate tokens/s of each draft count, one a round."""

    requests: int
    rates: dict[int, list[float]] = field(default_factory=dict)
    tokens: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    """Each count's greedy tokens of the level's requests (first round)."""

    def rate(self, drafts: int) -> float:
        return statistics.median(self.rates[drafts]) if self.rates.get(drafts) else 0.0

    def diverged(self, drafts: int) -> bool:
        return self.tokens.get(drafts) != self.tokens.get(0)

    def beats(self, more: int, fewer: int) -> bool:
        """``more`` drafts beat ``fewer``: round by round (the counts ran back to back in each) the
        ratio is above 1.0 every time and its median at least ``MIN_GAIN``."""
        ratios = [
            a / b for a, b in zip(self.rates.get(more, []), self.rates.get(fewer, []), strict=False) if b > 0
        ]
        return bool(ratios) and min(ratios) > 1.0 and statistics.median(ratios) >= MIN_GAIN

    def best(self, most: int) -> int:
        """The count up to ``most`` keeping the tokens that beats every count with fewer drafts it
        was chosen over (``beats``), more drafts only so."""
        chosen = 0
        for drafts in sorted(d for d in self.rates if 0 < d <= most):
            if not self.diverged(drafts) and self.beats(drafts, chosen):
                chosen = drafts
        return chosen

    def describe(self) -> str:
        figures = ", ".join(
            f"{d}: {self.rate(d):.0f}" + (" (tokens differ)" if d and self.diverged(d) else "")
            for d in sorted(self.rates)
        )
        return f"{self.requests} at once — tok/s by drafts {figures}"


def choose_by_load(levels: Sequence[LoadLevel]) -> Steps:
    """The schedule the measured ``levels`` call for (see the module's rule); ``()``: no level
    chose drafts."""
    steps: list[tuple[int, int]] = []
    most = max((d for level in levels for d in level.rates), default=0)
    for level in sorted(levels, key=lambda lv: lv.requests):
        most = level.best(most)
        if most == 0:
            break
        if steps and steps[-1][1] == most:
            steps[-1] = (level.requests, most)
        else:
            steps.append((level.requests, most))
    return tuple(steps)


def describe_steps(steps: Steps) -> str:
    """``3 drafts up to 16 running requests, 1 up to 64, none above``."""
    if not steps:
        return "no drafts at any measured load"
    first_drafts, first_up_to = steps[0][1], steps[0][0]
    drafts = f"{first_drafts} draft{'s' if first_drafts != 1 else ''}"
    parts = [f"{drafts} up to {first_up_to} running request{'s' if first_up_to != 1 else ''}"]
    parts += [f"{drafts} up to {up_to}" for up_to, drafts in steps[1:]]
    return ", ".join(parts) + ", none above"


def vllm_schedule(steps: Steps, max_num_seqs: int) -> list[list[int]]:
    """``steps`` as vLLM's ``num_speculative_tokens_per_batch_size``, ending at ``max_num_seqs``."""
    ranges: list[list[int]] = []
    start = 1
    for up_to, drafts in steps:
        end = min(up_to, max_num_seqs)
        if start <= end:
            ranges.append([start, end, drafts])
        start = end + 1
    if start <= max_num_seqs:
        ranges.append([start, max_num_seqs, 0])
    return ranges


def load_requests(renderer: PromptRenderer, count: int, tag: str) -> list[EngineRequest]:
    """``count`` greedy requests of ``TOKENS`` tokens over the parity set's text prompts."""
    sampling = SamplingSettings(max_tokens=TOKENS, temperature=0.0, seed=0, ignore_eos=True)
    prompts = [p for p in parity_prompts(frozenset({"text"})) if not p.history]
    made = [prompts[i % len(prompts)].request(renderer, sampling, tag=tag) for i in range(count)]
    return [replace(request, request_id=f"{request.request_id}-{i}") for i, request in enumerate(made)]


async def measure_by_load(
    engine: LoadEngine,
    drafts: int,
    levels: Sequence[int],
    renderer: PromptRenderer,
    say: Callable[[str], None],
    *,
    rounds: int = ROUNDS,
    tokens: int = TOKENS,
    clock: Callable[[], float] = time.monotonic,
) -> list[LoadLevel]:
    """Each of ``levels`` requests at once with ``drafts``, 1 and 0 drafts a step in turn (the
    order rotating by round), ``rounds`` times; the engine is left with no drafts."""
    counts = sorted({0, min(1, drafts), drafts})
    measured = []
    top = max(levels)
    for level in sorted(levels):
        figures = LoadLevel(level)
        asked = [
            replace(r, sampling=replace(r.sampling, max_tokens=tokens))
            for r in load_requests(renderer, level, f"load{level}-")
        ]
        for r in range(rounds):
            say(f"drafts by load: {level} at once, round {r + 1} of {rounds}")
            for j in range(len(counts)):
                count = counts[(r + j) % len(counts)]
                await engine.set_drafts(count, top)
                began = clock()
                finals = await asyncio.gather(
                    *(_finished(engine, replace(q, request_id=f"{q.request_id}-{count}-r{r}")) for q in asked)
                )
                wall = max(clock() - began, 1e-9)
                figures.rates.setdefault(count, []).append(sum(len(f.token_ids) for f in finals) / wall)
                if r == 0:
                    figures.tokens[count] = [tuple(f.token_ids) for f in finals]
        measured.append(figures)
    await engine.set_drafts(0, top)
    return measured


def default_levels(config: EngineConfig) -> tuple[int, ...]:
    """The levels to measure on this machine, up to the engine's batch limit where it sets one."""
    levels = LEVELS_GPU if on_gpu() else LEVELS_CPU
    limit = config.args.get("max_num_seqs")
    most = int(limit.value) if limit is not None else max(levels)
    return tuple(level for level in levels if level <= most) or (1,)


async def with_drafts_by_load(
    source: ModelSource,
    config: EngineConfig,
    choice: SpeculationChoice,
    levels: Sequence[int],
    log_path: Path,
    say: Callable[[str], None],
    *,
    rounds: int = ROUNDS,
    tokens: int = TOKENS,
) -> SpeculationChoice:
    """``choice`` with its drafts by load measured on an engine of ``config`` (the chosen
    candidate's: its drafts, attention and a changeable schedule), which is shut down after."""
    from backend.engine.vllm import VllmEngine
    from backend.gemma4.messages import PromptRenderer

    at_once = ", ".join(map(str, levels))
    say(f"drafts by load: {at_once} requests at once, {choice.drafts}, 1 and 0 drafts each")
    renderer = PromptRenderer.for_model(str(source.path))
    engine = VllmEngine(source, config, log_path=log_path)
    try:
        await engine.start()
        warm = load_requests(renderer, 1, "load-warm-")[0]
        await _finished(engine, replace(warm, sampling=replace(warm.sampling, max_tokens=8)))
        measured = await measure_by_load(
            engine, choice.drafts, levels, renderer, say, rounds=rounds, tokens=tokens
        )
    finally:
        await engine.shutdown()
    steps = choose_by_load(measured)
    say(f"drafts by load: {describe_steps(steps)}")
    return replace(choice, by_load=steps, load_figures=tuple(level.describe() for level in measured))


async def _finished(engine: LoadEngine, request: EngineRequest) -> Finished:
    events = [event async for event in engine.stream(request)]
    final = events[-1] if events else None
    if not isinstance(final, Finished):
        detail = getattr(final, "message", type(final).__name__)
        raise GemmaChatError(f"Measuring drafts by load failed: {detail}.", "See the engine's log.")
    return final
