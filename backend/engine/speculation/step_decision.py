"""The first start's speculation decision for a model whose steps are slow: predicted from step costs.

Measuring each count of drafts directly (``first_start``: 4 prompts x 64 tokens x 5 counts x 2
rounds) takes seconds on the demo model and half an hour on Gemma 4 E2B on 2 cores (a plain step
there takes 130-300 ms). A model that slow is decided from two measured quantities instead, on the
engine itself, within the first start's budget:

* what a step costs: a plain decode step, and a step verifying ``k`` drafts (with the drafter's own
  passes) for every ``k`` up to the most, a few steps each — from each request's decode time and
  the scheduler's per-step records (``TurnMetrics.draft_steps``);
* how many drafts are accepted: the drafter's acceptance, per position, on a short sample with the
  most drafts (``k`` fewer drafts accept ``min(accepted, k)``: drafts are verified in order).

The speed-up ``k`` drafts imply is their tokens a step times a plain step's cost over theirs; the
best ``k`` is chosen where that is at least ``MIN_GAIN``. It is a prediction, and says so. Plain
steps are measured twice, apart: where the two differ by ``BUSY_SPREAD`` or more the machine was
busy, and nothing is kept. The user's first replies then confirm or correct it
(``reply_check``): their own acceptance, at the costs measured here.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from backend.engine.protocol import EngineRequest, Finished
from backend.engine.speculation.choice import MIN_GAIN, ProbeRun, SpeculationChoice, tokens_per_step

STEP_TOKENS = 5
"""Tokens of each count's request: 4 decode steps plain, fewer where drafts are accepted. At E2B's
speed on 2 cores with row-exact verification (a step verifying k drafts costs about k + 1 plain
ones) and a drafter that is never accepted, the whole measurement takes about 35 s."""
SAMPLE_TOKENS = 7
"""Tokens of the most drafts' request, the acceptance sample (and its step cost)."""
WARM_TOKENS = 4
"""The start's first request (slow, not timed as a figure): its plain steps tell the model's speed."""
BUSY_SPREAD = 1.5
"""The first and the last plain step differ this much: the machine was busy (a quiet machine's
steps of one model differ by a few percent)."""
MEASURED_BY = "first start, predicted from step costs"
AGAIN = "nothing is kept, the next start measures again"


@dataclass(frozen=True)
class StepSample:
    """One request's decode: what its steps cost and what its drafts yielded."""

    drafts: int
    step_ms: float
    """Mean time of a step that verified ``drafts`` drafts (a plain step where 0)."""
    steps: int
    """Steps it is the mean of."""
    histogram: tuple[int, ...]
    """Its verifying steps by drafts accepted (0, 1, ...)."""
    rate: float


def sample(final: Finished, drafts: int, plain_ms: float | None) -> StepSample | None:
    """The steps of ``final``'s decode; None where it decoded too little to tell. A request's first
    decode steps may verify nothing (no draft yet): they are counted at ``plain_ms``."""
    metrics = final.metrics
    tokens, rate = metrics.generated_tokens, metrics.decode_tokens_per_s
    if tokens < 2 or not rate:
        return None
    decode_ms = 1000.0 * (tokens - 1) / rate
    if drafts == 0:
        return StepSample(0, decode_ms / (tokens - 1), tokens - 1, (), rate)
    if metrics.draft_steps:
        accepted = [taken for _, taken in metrics.draft_steps]
    else:  # the engine's counts only: its acceptance histogram
        accepted = [j for j, count in enumerate(metrics.acceptance_histogram or ()) for _ in range(count)]
    if not accepted:
        return None
    histogram = [0] * (drafts + 1)
    for taken in accepted[:-1] if len(accepted) > 1 else accepted:  # the token budget may cut the last
        histogram[min(taken, drafts)] += 1
    plain_steps = max(0, tokens - 1 - sum(taken + 1 for taken in accepted))
    verify_ms = decode_ms - plain_steps * (plain_ms or 0.0)
    if verify_ms <= 0:
        return None
    return StepSample(drafts, verify_ms / len(accepted), len(accepted), tuple(histogram), rate)


@dataclass(frozen=True)
class StepCostDecision:
    """The measured figures and the choice they imply."""

    plain_ms: tuple[float, ...]
    """Plain step costs, measured apart (their spread shows a busy machine)."""
    verifying_ms: dict[int, float]
    histogram: tuple[int, ...]
    """The acceptance sample's verifying steps by drafts accepted (with the most drafts)."""
    most: int

    def implied(self, drafts: int) -> float | None:
        cost = self.verifying_ms.get(drafts)
        if not cost or not self.plain_ms or not sum(self.histogram):
            return None
        plain = statistics.median(self.plain_ms)
        if not plain:
            return None
        return tokens_per_step(self.histogram, drafts) * plain / cost

    def busy(self) -> str | None:
        if not self.plain_ms:
            return None
        low, high = min(self.plain_ms), max(self.plain_ms)
        if low > 0 and high / low >= BUSY_SPREAD:
            return (
                f"a plain step took {self.plain_ms[0]:.0f} ms at first and {self.plain_ms[-1]:.0f} ms later "
                f"({high / low:.1f}x): the machine was busy while it measured"
            )
        return None

    def runs(self, method: str) -> tuple[ProbeRun, ...]:
        plain = statistics.median(self.plain_ms)
        out = [ProbeRun("none", 0, (1000.0 / plain,), step_ms=plain)]
        for k, cost in sorted(self.verifying_ms.items()):
            tokens = tokens_per_step(self.histogram, k)
            out.append(ProbeRun(method, k, (1000.0 * tokens / cost,), self.histogram, step_ms=cost))
        return tuple(out)

    def choice(self, method: str) -> SpeculationChoice:
        if len(self.plain_ms) < 2 or not self.verifying_ms:  # both plain ones: they show a busy machine
            reason = (
                f"the first start's budget measured {len(self.plain_ms)} plain and {len(self.verifying_ms)} "
                f"verifying step costs, too few to decide at this model's speed; {AGAIN}"
            )
            return SpeculationChoice("none", 0, 1.0, 1.0, 1.0, (), measured_by=MEASURED_BY, reason=reason)
        runs = self.runs(method)
        implied = {k: s for k in self.verifying_ms if (s := self.implied(k)) is not None}
        best = max(implied, key=lambda k: implied[k], default=None)
        plain = statistics.median(self.plain_ms)
        if best is not None and implied[best] >= MIN_GAIN:
            s = implied[best]
            return SpeculationChoice(method, best, s, s, s, runs, measured_by=MEASURED_BY, predicted=True)
        if best is None:
            reason = "the step costs could not be measured (too little decoded)"
        else:
            cost = self.verifying_ms[best] / plain
            reason = (
                f"verifying {best} draft{'s' if best != 1 else ''} costs {cost:.1f}× a plain step here "
                f"({self.verifying_ms[best]:.0f} vs {plain:.0f} ms) for "
                f"{tokens_per_step(self.histogram, best):.2f} tokens a step: {implied[best]:.2f}x at best, "
                f"predicted ({MEASURED_BY})"
            )
        return SpeculationChoice("none", 0, 1.0, 1.0, 1.0, runs, measured_by=MEASURED_BY, reason=reason)


Run = Callable[[EngineRequest, int], Awaitable[Finished]]
"""Run one request with this many drafts a step (the engine's schedule set), to its end."""


async def measure(
    run: Run, asked: Sequence[EngineRequest], most: int, plain_first: float | None = None
) -> StepCostDecision:
    """Plain steps, the most drafts (the acceptance sample), one draft, plain again — the two plain
    measurements and two counts first, so a budget that ends early still decides — then each other
    count. ``plain_first``: a plain step's cost already measured."""
    plain: list[float] = [plain_first] if plain_first else []
    verifying: dict[int, float] = {}
    histogram: tuple[int, ...] = ()
    order = ([] if plain_first else [0]) + [most, *([1, 0] if most > 1 else [0]), *range(2, most)]
    try:
        for i, k in enumerate(order):
            request = asked[i % len(asked)]
            tokens = SAMPLE_TOKENS if k == most and not histogram else STEP_TOKENS
            sampling = replace(request.sampling, max_tokens=tokens)
            now = replace(request, request_id=f"{request.request_id}-steps-{k}-{i}", sampling=sampling)
            got = sample(await run(now, k), k, statistics.median(plain) if plain else None)
            if got is None:
                continue
            if k == 0:
                plain.append(got.step_ms)
            else:
                verifying[k] = got.step_ms
                if k == most and not histogram:
                    histogram = got.histogram
    except TimeoutError:  # the budget ended: decide on what was measured (the missing counts are out)
        pass
    return StepCostDecision(tuple(plain), verifying, histogram, most)
