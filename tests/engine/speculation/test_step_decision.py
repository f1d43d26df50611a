"""The first start's speculation decision at a slow model's speed (``step_decision``) and the check
the user's replies make of it (``reply_check``), on stand-in engines whose figures are E2B's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource
from backend.engine.protocol import EngineRequest, Finished, TurnEvent
from backend.engine.speculation import step_decision
from backend.engine.speculation.first_start import (
    DECISION_ENV,
    DraftPlan,
    decide,
    decision_method,
    settle_drafts,
)
from backend.engine.speculation.kept import stored_choice
from backend.engine.speculation.reply_check import CHECKED, ReplyCheck
from backend.gemma4.messages import PromptRenderer

PLAN = DraftPlan("mtp", 4, "key-steps", 4)
E2B_PLAIN_MS = 300.0
"""A plain decode step of Gemma 4 E2B on 2 cores (the brief's figure; 345 ms measured here)."""


@dataclass
class Timed:
    """Answers each request as an engine whose steps cost ``cost_ms(drafts)`` and whose drafter has
    its first ``accept`` drafts accepted every step, with the scheduler's per-step records."""

    cost_ms: Callable[[int], float]
    accept: int
    plain_costs: list[float] = field(default_factory=list)
    """Successive plain-step costs, overriding ``cost_ms(0)`` (a machine that gets busy)."""
    drafts: int = 0
    served: list[tuple[int, int]] = field(default_factory=list)
    """(drafts, tokens) of each request."""
    set_calls: list[tuple[int, int]] = field(default_factory=list)

    async def set_drafts(self, drafts: int, up_to: int, then: tuple[tuple[int, int], ...] = ()) -> None:
        self.drafts = drafts
        self.set_calls.append((drafts, up_to))

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        tokens, k = request.sampling.max_tokens, self.drafts
        self.served.append((k, tokens))
        if k == 0:
            cost = self.plain_costs.pop(0) if self.plain_costs else self.cost_ms(0)
            decode_ms, steps = (tokens - 1) * cost, None
        else:
            steps, left = [], tokens - 1
            while left > 0:
                taken = min(min(self.accept, k) + 1, left)
                steps.append((k, taken - 1))
                left -= taken
            decode_ms = len(steps) * self.cost_ms(k)
        metrics = TurnMetrics(
            generated_tokens=tokens,
            decode_tokens_per_s=1000.0 * (tokens - 1) / decode_ms,
            draft_steps=tuple(steps) if steps else None,
        )
        yield Finished(request.request_id, "x", tuple(range(tokens)), metrics, "length")


@pytest.fixture(scope="module")
def renderer(tiny_source: ModelSource) -> PromptRenderer:
    return PromptRenderer.for_model(str(tiny_source.path))


def test_a_model_too_slow_to_time_every_count_is_predicted_from_step_costs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DECISION_ENV, raising=False)
    full_s = E2B_PLAIN_MS / 1000 * 64 * 4 * 2 * 5  # every count, every prompt, two rounds
    assert decision_method(full_s, 40.0) == "steps", f"{full_s:.0f} s of decoding cannot fit 40 s"
    assert decision_method(5.0 / 1000 * 64 * 4 * 2 * 5, 40.0) == "rates", "the demo's 5 ms steps fit"
    monkeypatch.setenv(DECISION_ENV, "rates")
    assert decision_method(full_s, 40.0) == "rates", "forced"


async def test_e2b_with_row_exact_verifying_and_a_weak_drafter_decides_none_with_its_figures(
    renderer: PromptRenderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every E2B layer is row-variant on AVX512-BF16 (inner sizes >= 1,536): verifying k drafts costs
    about k + 1 plain steps; a random drafter is accepted rarely."""
    monkeypatch.delenv(DECISION_ENV, raising=False)
    engine = Timed(lambda k: E2B_PLAIN_MS * (k + 1), accept=0)
    choice = await decide(engine, PLAN, renderer)
    assert choice.method == "none" and choice.predicted is False
    assert "costs 2.0× a plain step here (600 vs 300 ms) for 1.00 tokens a step" in choice.verdict()
    assert "predicted from step costs" in choice.verdict()
    decoded = sum(tokens - 1 for _, tokens in engine.served)
    assert decoded * E2B_PLAIN_MS * 2 / 1000 < 40, "the whole decision fits the first start's budget"
    assert engine.set_calls[-1] == (0, 4)


async def test_cheap_verifying_and_a_good_drafter_choose_the_most_drafts_as_a_prediction(
    renderer: PromptRenderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory-bound steps (no row-exact cut): verifying 4 drafts costs 1.2x a plain step."""
    monkeypatch.delenv(DECISION_ENV, raising=False)
    engine = Timed(lambda k: E2B_PLAIN_MS * (1 + 0.05 * k), accept=4)
    choice = await decide(engine, PLAN, renderer)
    assert (choice.method, choice.drafts, choice.predicted) == ("mtp", 4, True)
    assert choice.speedup == pytest.approx(5 / 1.2, abs=0.01)
    assert choice.verdict() == "MTP ×4, predicted 4.17x here (first start, predicted from step costs)"


async def test_a_machine_busy_while_it_measured_keeps_nothing(
    renderer: PromptRenderer, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DECISION_ENV, raising=False)
    warm, first, last = 300.0, 300.0, 700.0
    engine = Timed(lambda k: E2B_PLAIN_MS * (1 + 0.05 * k), accept=3, plain_costs=[warm, first, last])
    plan = DraftPlan("mtp", 4, "key-steps-busy", 4)
    choice = await settle_drafts(engine, plan, renderer, lambda _: None)
    assert "a plain step took 300 ms at first and 700 ms later (2.3x)" in choice.verdict()
    assert stored_choice(plan.key) is None, "the next start measures again"


async def test_a_decision_is_kept_and_a_second_start_measures_nothing(
    renderer: PromptRenderer, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DECISION_ENV, raising=False)
    plan = DraftPlan("mtp", 4, "key-steps-kept", 4)
    first = await settle_drafts(Timed(lambda k: E2B_PLAIN_MS * (k + 1), 0), plan, renderer, lambda _: None)
    assert stored_choice(plan.key) == first and first.method == "none"
    again = Timed(lambda k: E2B_PLAIN_MS, 4)
    said: list[str] = []
    assert await settle_drafts(again, plan, renderer, said.append) == first
    assert again.served == [] and said == [], "a second start names the kept decision, measuring nothing"


def _replies(accepted: int, steps: int) -> TurnMetrics:
    return TurnMetrics(generated_tokens=steps * (accepted + 1) + 1, draft_steps=((2, accepted),) * steps)


async def test_replies_that_accept_less_than_predicted_turn_the_drafts_off_and_keep_that(
    gemma_home: Path,
) -> None:
    costs = Timed(lambda k: E2B_PLAIN_MS * (1 + 0.1 * k), accept=2)
    predicted = step_decision.StepCostDecision((300.0, 300.0), {1: 330.0, 2: 360.0}, (0, 0, 10), 2).choice(
        "mtp"
    )
    assert (predicted.method, predicted.drafts) == ("mtp", 2) and ReplyCheck.needed(predicted)
    check = ReplyCheck("key-replies-poor", predicted, 4)
    await check.add(_replies(0, 20), costs)
    assert check.verdict is None and costs.set_calls == [], "20 steps: not yet"
    await check.add(_replies(0, 20), costs)
    assert costs.set_calls == [(0, 4)], "the engine stops drafting"
    kept = stored_choice("key-replies-poor")
    assert kept is not None and kept.method == "none" and CHECKED in kept.measured_by
    assert "your replies accepted 0.00 drafts a step: 0.83x" in kept.verdict()
    assert not ReplyCheck.needed(kept)


async def test_replies_that_bear_the_prediction_out_confirm_it(gemma_home: Path) -> None:
    costs = Timed(lambda k: E2B_PLAIN_MS, accept=2)
    predicted = step_decision.StepCostDecision((300.0, 300.0), {1: 330.0, 2: 360.0}, (0, 0, 10), 2).choice(
        "mtp"
    )
    check = ReplyCheck("key-replies-good", predicted, 4)
    await check.add(_replies(2, 40), costs)
    kept = stored_choice("key-replies-good")
    assert kept is not None and (kept.method, kept.drafts) == ("mtp", 2) and costs.set_calls == []
    assert f"{CHECKED}: 40 steps, 2.50x" in kept.verdict()
    assert not ReplyCheck.needed(kept), "checked once: a later start checks nothing"
