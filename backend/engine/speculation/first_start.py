"""The optimized CPU path decides its speculation at its first start, on the engine it started.

With ``speculation = "auto"`` (the default) the optimized engine on a CPU starts with its drafter
(the model's MTP drafter, else ngram prompt lookup) allowed ``most`` drafts a step and proposing
none (``DraftPlan``). When it is up, ``settle_drafts`` looks for the choice kept for this model and
machine (``choice_key``: model and drafter files, dtype, vLLM, CPU flags, cores, the path's
environment): found, it sets the engine's drafts to it and is done (a warm start measures
nothing). Not found, it measures: the same short greedy prompts, one at a time, on this one engine
with 0, 1, ... ``most`` drafts a step — the counts taking turns prompt by prompt and set between
requests through the engine core (``backend.compat.speculation.draft_schedule``) — until each
count has run every
prompt ``rounds`` times or ``budget_s`` is spent — a deadline every request runs under, so a
request slowed by a busy machine is stopped where the budget ends, not after it. The rule is the
probe's (``choose``): the count with the highest median ratio to no drafts, at least
``MIN_GAIN``, above 1.0 on every prompt, measured on at least ``MIN_PAIRED`` prompts, and with no
drafts' tokens on every prompt; else none. The choice is kept, so the next start applies it at
once (where the budget ended before ``MIN_PAIRED`` prompts were measured nothing is kept: the
next start measures again); ``paths --measure`` replaces it with a full probe.

When it measures is the caller's (``when_idle``): the app's engine answers at once and measures
when idle, one short request at a time, a reply preempting it (``Preempted``: the request runs
again later); ``bench`` and the probes measure here, before they serve; ``ask`` never does.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from backend.config import switch_rules
from backend.config.switch_rules import speculation_decision
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineInfo, EngineRequest, Finished, SamplingSettings
from backend.engine.speculation import step_decision
from backend.engine.speculation.choice import (
    MIN_GAIN,
    MIN_PAIRED,
    ProbeRun,
    SpeculationChoice,
    add_histogram,
    choose,
    paired_speedups,
)
from backend.engine.speculation.kept import store_choice, stored_choice
from backend.engine.speculation.replies import final_reply
from backend.engine.speculation.reply_check import ReplyCheck
from backend.engine.speculation.step_decision import AGAIN
from backend.errors import EngineDied, GemmaChatError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from backend.engine.protocol import TurnEvent
    from backend.gemma4.messages import PromptRenderer

BUDGET_S = 40.0
"""At most this long measuring at a first start (the start itself also loads and compiles the
drafter): the first-ever start of a model grows by under a minute on 2 cores."""
PROMPTS = 4
ROUNDS = 2
TOKENS = 64


@dataclass(frozen=True)
class DraftPlan:
    """The optimized CPU engine's speculation when settings leave it to measurement: started with
    ``most`` drafts of ``method`` allowed, it proposes as many as the choice kept under ``key`` says
    (none until then); with none kept, its first start measures each count on the engine itself
    (``backend.engine.speculation.first_start``)."""

    method: str
    most: int
    key: str
    up_to: int
    """Running requests up to which steps draft (above, none: a CPU is compute-bound there)."""


class Preempted(Exception):
    """A reply took the engine from a measurement made when idle (``when_idle``) while one of its
    requests ran or was about to: that request runs again once the engine is idle."""


class DraftEngine(Protocol):
    """What the deciding needs of an engine (``VllmEngine``)."""

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]: ...

    async def set_drafts(self, drafts: int, up_to: int, then: tuple[tuple[int, int], ...] = ()) -> None: ...


@dataclass
class _Count:
    drafts: int
    rates: dict[str, list[float]] = field(default_factory=dict)
    tokens: dict[str, tuple[int, ...]] = field(default_factory=dict)
    histogram: list[int] = field(default_factory=list)

    def add(self, prompt: str, round_: int, final: Finished) -> None:
        if round_ == 0:
            self.tokens[prompt] = tuple(final.token_ids)
        self.rates.setdefault(prompt, []).append(final.metrics.decode_tokens_per_s or 0.0)
        add_histogram(self.histogram, final.metrics.acceptance_histogram)

    def run(self, method: str, reference: _Count) -> ProbeRun:
        measured = [rid for rid in reference.rates if rid in self.rates]
        diverged = tuple(
            i for i, rid in enumerate(measured) if self.tokens.get(rid) != reference.tokens.get(rid)
        )
        return ProbeRun(
            method if self.drafts else "none",
            self.drafts,
            tuple(statistics.median(self.rates[rid]) for rid in measured),
            tuple(self.histogram),
            diverged=diverged,
        )


async def settle_drafts(
    engine: DraftEngine,
    plan: DraftPlan,
    renderer: PromptRenderer,
    say: Callable[[str], None],
    *,
    budget_s: float = BUDGET_S,
    rounds: int = ROUNDS,
    prompts: int = PROMPTS,
    kept: SpeculationChoice | None = None,
) -> SpeculationChoice:
    """Apply the choice kept for ``plan``'s model and machine (``kept``: as the caller read it),
    measuring it first where none is."""
    choice = kept if kept is not None else stored_choice(plan.key)
    if choice is None:
        say(measuring_stage(budget_s))
        choice = await decide(engine, plan, renderer, budget_s=budget_s, rounds=rounds, prompts=prompts)
        if not undecided(choice):
            store_choice(plan.key, choice)
    first, *then = serving_steps(choice, plan)
    await engine.set_drafts(first[1], first[0], tuple(then))
    return choice


def serving_steps(choice: SpeculationChoice | None, plan: DraftPlan) -> tuple[tuple[int, int], ...]:
    """The engine's drafts by running requests once ``choice`` is applied (none where it is None,
    or names another drafter or more drafts than the engine was started with)."""
    applies = choice is not None and choice.method == plan.method and choice.drafts <= plan.most
    steps = applied_steps(choice, plan) if choice is not None and applies else ()
    return steps or ((plan.up_to, 0),)


def applied_steps(choice: SpeculationChoice, plan: DraftPlan) -> tuple[tuple[int, int], ...]:
    """Drafts by running requests for ``choice``: as ``paths --measure`` measured them by load,
    else the choice's drafts up to ``plan.up_to`` requests (none above either way)."""
    if choice.method == "none":
        return ()
    if choice.by_load is not None:
        return tuple((up_to, min(drafts, plan.most)) for up_to, drafts in choice.by_load)
    return ((plan.up_to, choice.drafts),)


def measuring_stage(budget_s: float = BUDGET_S) -> str:
    """The start's stage while it measures the drafts before serving (``bench``, the probes; the
    app measures when idle, and its status bar says ``when_idle.PENDING``)."""
    return f"measuring speculation ≤{budget_s:.0f} s"


async def with_drafts_settled(
    engine: DraftEngine,
    info: EngineInfo,
    plan: DraftPlan,
    renderer: PromptRenderer,
    say: Callable[[str], None],
    kept: SpeculationChoice | None = None,
) -> tuple[EngineInfo, ReplyCheck | None]:
    """``info`` once the engine's drafts are settled, naming the verdict, and the check the user's
    replies make of a predicted choice (``reply_check``); where measuring failed (but the engine
    lives) the engine runs without drafts and the start note says why."""
    try:
        choice = await settle_drafts(engine, plan, renderer, say, kept=kept)
    except EngineDied:
        raise
    except (GemmaChatError, RuntimeError) as error:
        return unmeasured_info(info, error), None
    return measured_info(info, plan, choice)


def measured_info(
    info: EngineInfo, plan: DraftPlan, choice: SpeculationChoice
) -> tuple[EngineInfo, ReplyCheck | None]:
    """``info`` naming ``choice``'s verdict, and the check the user's replies make of a predicted one."""
    check = ReplyCheck(plan.key, choice, plan.up_to) if ReplyCheck.needed(choice) else None
    return replace(info, speculation=choice.verdict()), check


def unmeasured_info(info: EngineInfo, error: Exception) -> EngineInfo:
    """``info`` whose note says why measuring failed: the engine lives and runs without drafts."""
    note = f"Speculation could not be measured ({error}); the optimized path runs without drafts."
    return replace(info, start_note=" ".join(filter(None, [info.start_note, note])), speculation=None)


def requests(renderer: PromptRenderer, prompts: int) -> list[EngineRequest]:
    sampling = SamplingSettings(max_tokens=TOKENS, temperature=0.0, seed=0, ignore_eos=True)
    chosen = [p for p in parity_prompts(frozenset({"text"})) if not p.history][:prompts]
    return [p.request(renderer, sampling, tag="decide-") for p in chosen]


async def decide(
    engine: DraftEngine,
    plan: DraftPlan,
    renderer: PromptRenderer,
    *,
    budget_s: float = BUDGET_S,
    rounds: int = ROUNDS,
    prompts: int = PROMPTS,
    clock: Callable[[], float] = time.monotonic,
) -> SpeculationChoice:
    """Measure 0..``plan.most`` drafts on ``engine`` within ``budget_s`` and choose (not kept)."""
    counts = [_Count(k) for k in range(plan.most + 1)]
    asked = requests(renderer, prompts)
    deadline = clock() + budget_s

    async def run(request: EngineRequest, drafts: int) -> Finished:
        while True:  # a request a reply preempted runs again (only a measurement when idle is)
            try:
                await engine.set_drafts(drafts, plan.up_to)
                return await _finished(engine, request, deadline - clock())
            except Preempted:
                continue

    try:  # the first request after a start is slow: not timed; the next one tells the model's speed
        sampled = None
        for tokens, tag in ((step_decision.WARM_TOKENS, "warm-0"), (step_decision.STEP_TOKENS, "speed")):
            probe = replace(asked[0], request_id=f"{asked[0].request_id}-{tag}")
            probe = replace(probe, sampling=replace(probe.sampling, max_tokens=tokens))
            sampled = step_decision.sample(await run(probe, 0), 0, None)
    except TimeoutError:
        sampled = None
    full_s = (sampled.step_ms / 1000 if sampled else float("inf")) * TOKENS * prompts * rounds * len(counts)
    if decision_method(full_s, budget_s) == "steps":
        figures = await step_decision.measure(run, asked, plan.most, sampled.step_ms if sampled else None)
        await engine.set_drafts(0, plan.up_to)
        choice = figures.choice(plan.method)
        busy = figures.busy()
        if busy:  # no drafts on figures that decide nothing
            return replace(choice, method="none", drafts=0, speedup=1.0, reason=f"{busy}; {AGAIN}")
        return choice
    try:
        for count in (counts[0], counts[-1]):  # the first requests after a start are slow: not timed
            warm = replace(asked[0], request_id=f"{asked[0].request_id}-warm-{count.drafts}")
            await run(warm, count.drafts)
        for r in range(rounds):
            for i, request in enumerate(asked):
                for j in range(len(counts)):
                    count = counts[(r + i + j) % len(counts)]  # the order rotates: drift falls on all alike
                    rid = f"{request.request_id}-{count.drafts}-r{r}"
                    count.add(
                        request.request_id, r, await run(replace(request, request_id=rid), count.drafts)
                    )
    except TimeoutError:  # the budget ended mid-request (that request was stopped): decide on the rest
        pass
    await engine.set_drafts(0, plan.up_to)
    plain, *drafted = (count.run(plan.method, counts[0]) for count in counts)
    choice = replace(choose(plain, drafted), measured_by="first start")
    unsound = unsound_measurement(counts, plain, drafted, choice.method)
    if unsound:  # no drafts on figures that decide nothing, as the step costs' busy rule
        choice = replace(choice, method="none", drafts=0, speedup=1.0, reason=f"{unsound}; {AGAIN}")
    elif choice.method == "none" and len(plain.rates) < MIN_PAIRED:
        reason = (
            f"the first start's {budget_s:.0f} s measured {len(plain.rates)} prompt(s), too few to "
            f"decide at this model's speed; {AGAIN} (`gemma-chat paths --measure` measures fully)"
        )
        choice = replace(choice, reason=reason)
    return choice


def undecided(choice: SpeculationChoice) -> bool:
    """The figures decided nothing (too few, or a busy machine): the choice is not kept."""
    return AGAIN in choice.reason


DECISION_ENV = switch_rules.SPECULATION_DECISION
"""``rates`` or ``steps``: the first start decides by timing each count of drafts, or predicts from
step costs, whatever the model's speed (to test either on any model)."""


def decision_method(full_s: float, budget_s: float) -> str:
    """``rates`` where timing every count of drafts fits the budget (at the warm request's plain step
    cost), else ``steps`` (``step_decision``); forced by ``GEMMA_CHAT_FORCE_SPECULATION_DECISION``."""
    forced = speculation_decision()
    if forced:
        return forced
    return "rates" if full_s <= budget_s else "steps"


BUSY_SPREAD = 1.5
"""A request decodes this many times faster in one round than in the other, at the same drafts, on
the median of every request measured twice: the machine was busy while it measured (on a quiet
machine one request's two rounds differ by a few percent; one slow moment moves one pair, not the
median), and the figures decide nothing."""


def unsound_measurement(
    counts: list[_Count], plain: ProbeRun, drafted: list[ProbeRun], method: str
) -> str | None:
    """Why the figures cannot be kept, from their own evidence (None: they can): one request's
    rates across rounds spread past ``BUSY_SPREAD`` on the median; or no speculation chosen
    although a count measured a gain on the median — rejected only for one prompt slower than
    none, figures that contradict each other."""
    pairs = sorted(
        (max(rates) / min(rates), min(rates), max(rates))
        for count in counts
        for rates in count.rates.values()
        if len(rates) > 1 and min(rates) > 0
    )
    if pairs and pairs[len(pairs) // 2][0] >= BUSY_SPREAD:
        _, low, high = pairs[-1]
        return (
            f"a request's two rounds differed {pairs[len(pairs) // 2][0]:.1f}x on the median (one "
            f"decoded at {low:.0f} and {high:.0f} tok/s): the machine was busy while it measured"
        )
    if method != "none":
        return None
    for run in drafted:
        ratios = paired_speedups(plain, run)
        if run.diverged or len(ratios) < MIN_PAIRED or statistics.median(ratios) < MIN_GAIN:
            continue
        return (
            f"{run.label()} measured {statistics.median(ratios):.2f}x on the median yet "
            f"{min(ratios):.2f}x on one prompt: figures that contradict each other (a busy machine)"
        )
    return None


async def _finished(engine: DraftEngine, request: EngineRequest, within_s: float) -> Finished:
    """The request's final event; ``TimeoutError`` where it has not finished within ``within_s``
    (the request is cancelled, which aborts it in the engine)."""
    if within_s <= 0:
        raise TimeoutError

    reply = final_reply(engine, request, "Measuring speculation at the first start failed", "See its log.")
    return await asyncio.wait_for(reply, within_s)
