"""How the optimized path's drafts fall as more requests run at once, measured on its engine.

A verifying step reads the weights once for ``1 + k`` tokens a request: with few requests the
machine waits on memory and drafts come almost free, with many it is compute-bound and each
rejected draft is work thrown away. Where that turns is a property of the card (or CPU), the
model and the drafter's acceptance, so ``paths --measure`` measures it after choosing the
drafts for one request: on the optimized engine itself, at each of a few concurrency levels
(``LEVELS_GPU`` / ``LEVELS_CPU``, up to the engine's batch limit), ``level`` requests at once with
``k``, 1 and 0 drafts a step in turn (set through the engine core,
``backend.compat.speculation.draft_schedule``),
for ``rounds`` rounds; a count's figure at a level is the median of its aggregate tokens/s.

The rule and the schedule it makes are ``load_rule``'s. The optimized path applies the schedule
(vLLM's ``num_speculative_tokens_per_batch_size``) in place of the estimated thresholds. Tokens
cannot move with it: drafts only decide how many tokens a step may accept, and a count that changed
a token at some level is not chosen there. On a GPU in fast mode a step with drafts runs other
kernels than one without, so a difference there is re-checked under batch-invariant kernels
(``recheck_by_load``, as the probe's other stages do) before it cuts the count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from backend.engine.platform import on_gpu
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.speculation.load_rule import LoadLevel, Steps, choose_by_load, describe_steps
from backend.engine.speculation.replies import final_reply
from backend.errors import problem_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from backend.engine.model.source import ModelSource
    from backend.engine.paths.engine_args import EngineConfig
    from backend.engine.protocol import TurnEvent
    from backend.engine.speculation.choice import SpeculationChoice
    from backend.gemma4.messages import PromptRenderer

LEVELS_GPU = (1, 4, 16, 64, 256)
LEVELS_CPU = (1, 2, 4, 8)
TOKENS = 48
ROUNDS = 3
T = TypeVar("T")


class LoadEngine(Protocol):
    """What the measuring needs of an engine (``VllmEngine``)."""

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]: ...

    async def set_drafts(self, drafts: int, up_to: int, then: Steps = ()) -> None: ...


def load_requests(
    renderer: PromptRenderer, count: int, tag: str, tokens: int = TOKENS
) -> list[EngineRequest]:
    """``count`` greedy requests of ``tokens`` tokens over the parity set's text prompts."""
    sampling = SamplingSettings(max_tokens=tokens, temperature=0.0, seed=0, ignore_eos=True)
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
        asked = load_requests(renderer, level, f"load{level}-", tokens)
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
    renderer: PromptRenderer,
    log_path: Path,
    say: Callable[[str], None],
    *,
    rounds: int = ROUNDS,
    tokens: int = TOKENS,
    exact: EngineConfig | None = None,
) -> SpeculationChoice:
    """``choice`` with its drafts by load measured on an engine of ``config`` (the chosen
    candidate's: its drafts, attention and a changeable schedule), which is shut down after.
    ``exact``: the same under batch-invariant kernels (the probe's ``exact_config``; a GPU in fast
    mode), for ``recheck_by_load``; None: tokens decide as measured (a CPU, or exact mode already)."""
    at_once = ", ".join(map(str, levels))
    say(f"drafts by load: {at_once} requests at once, {choice.drafts}, 1 and 0 drafts each")

    async def measure(engine: LoadEngine) -> list[LoadLevel]:
        return await measure_by_load(
            engine, choice.drafts, levels, renderer, say, rounds=rounds, tokens=tokens
        )

    measured = await _on_engine(source, config, renderer, log_path, measure)
    if exact is not None:
        await recheck_by_load(source, exact, measured, choice.drafts, renderer, log_path, say, tokens=tokens)
    steps = choose_by_load(measured)
    say(f"drafts by load: {describe_steps(steps)}")
    return replace(choice, by_load=steps, load_figures=tuple(level.describe() for level in measured))


async def recheck_by_load(
    source: ModelSource,
    exact: EngineConfig,
    measured: Sequence[LoadLevel],
    drafts: int,
    renderer: PromptRenderer,
    log_path: Path,
    say: Callable[[str], None],
    *,
    tokens: int = TOKENS,
) -> None:
    """The levels where a count's tokens differed from no drafts' run again, one round, on an engine
    of ``exact`` (vLLM's batch-invariant kernels): a count whose tokens agree there differed through
    the kernels alone and is marked ``kernel_only`` (still chosen); one that still differs is not.
    A failure there is said, and the fast mode's tokens decide (the figures stay)."""
    differing = [level for level in measured if any(level.differs(d) for d in level.rates if d)]
    if not differing:
        return
    again_levels = [level.requests for level in differing]
    say(f"drafts by load: parity in exact mode at {', '.join(map(str, again_levels))} at once, again")

    async def measure(engine: LoadEngine) -> list[LoadLevel]:
        return await measure_by_load(engine, drafts, again_levels, renderer, say, rounds=1, tokens=tokens)

    try:
        reruns = await _on_engine(source, exact, renderer, log_path, measure)
    except Exception as error:  # any engine failure: the fast mode's verdict stands
        failed = problem_of(error)
        say(f"drafts by load: parity in exact mode failed, the fast mode's tokens decide — {failed}")
        return
    again = {rerun.requests: rerun for rerun in reruns}
    for level in differing:
        rerun = again[level.requests]
        level.kernel_only |= {d for d in level.rates if d and level.differs(d) and not rerun.differs(d)}


async def _on_engine(
    source: ModelSource,
    config: EngineConfig,
    renderer: PromptRenderer,
    log_path: Path,
    work: Callable[[LoadEngine], Awaitable[T]],
) -> T:
    """``work`` on a started, warmed-up engine of ``config``, shut down after (on a GPU it holds
    the optimized path's share: one at a time)."""
    from backend.engine.local.vllm import VllmEngine

    engine = VllmEngine(source, config, log_path=log_path)
    try:
        await engine.start()
        await _finished(engine, load_requests(renderer, 1, "load-warm-", 8)[0])
        return await work(engine)
    finally:
        await engine.shutdown()


async def _finished(engine: LoadEngine, request: EngineRequest) -> Finished:
    return await final_reply(engine, request, "Measuring drafts by load failed", "See the engine's log.")
