"""The user's first replies confirm or correct a speculation choice predicted from step costs.

A first start that predicted its choice (``step_decision``: a slow model) sampled the drafter's
acceptance on one short request. The replies that follow are the real workload: each reply's
verifying steps (the scheduler's per-step records) add to an acceptance histogram, and once
``CHECK_STEPS`` steps are in, the speed-up those drafts imply at the step costs the start measured
is worked out again. At least 1.0: the choice is confirmed and kept so; below: the engine stops
drafting and the corrected choice (none, with the figures) is kept. Either way once per model and
machine: the kept choice names how it was checked, and a later start checks nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from backend.engine.metrics import TurnMetrics
from backend.engine.speculation.choice import SpeculationChoice, candidate_label, tokens_per_step
from backend.engine.speculation.kept import store_choice

CHECK_STEPS = 32
"""Verifying steps of the user's replies before the prediction is confirmed or corrected."""
CHECKED = "checked against your replies"


class DraftSetter(Protocol):
    async def set_drafts(self, drafts: int, up_to: int, then: tuple[tuple[int, int], ...] = ()) -> None: ...


class ReplyCheck:
    def __init__(self, key: str, choice: SpeculationChoice, up_to: int) -> None:
        self.key = key
        self.choice = choice
        self.up_to = up_to
        self.histogram = [0] * (choice.drafts + 1)
        self.verdict: str | None = None
        """The checked choice's verdict, once checked (None before)."""

    @staticmethod
    def needed(choice: SpeculationChoice) -> bool:
        return choice.predicted and choice.method != "none" and CHECKED not in choice.measured_by

    def implied(self) -> float | None:
        """The speed-up the replies' acceptance implies at the measured step costs."""
        plain = next((run.step_ms for run in self.choice.runs if run.method == "none"), None)
        cost = next(
            (run.step_ms for run in self.choice.runs if run.drafts == self.choice.drafts and run.step_ms),
            None,
        )
        if not plain or not cost or not sum(self.histogram):
            return None
        return tokens_per_step(tuple(self.histogram), self.choice.drafts) * plain / cost

    async def add(self, metrics: TurnMetrics, engine: DraftSetter) -> None:
        """Count one reply's verifying steps; at ``CHECK_STEPS`` confirm or correct (once)."""
        if self.verdict is not None:
            return
        for _, accepted in metrics.draft_steps or ():
            self.histogram[min(accepted, self.choice.drafts)] += 1
        steps = sum(self.histogram)
        if steps < CHECK_STEPS or (implied := self.implied()) is None:
            return
        how = f"{self.choice.measured_by}; {CHECKED}: {steps} steps, {implied:.2f}x"
        if implied >= 1.0:
            checked = replace(self.choice, speedup=implied, measured_by=how)
        else:
            tokens = tokens_per_step(tuple(self.histogram), self.choice.drafts)
            reason = (
                f"{candidate_label(self.choice.method, self.choice.drafts)} was "
                f"predicted {self.choice.speedup:.2f}x, but your replies accepted {tokens - 1:.2f} drafts "
                f"a step: {implied:.2f}x at the measured step costs ({CHECKED})"
            )
            checked = replace(
                self.choice, method="none", drafts=0, speedup=1.0, reason=reason, measured_by=how
            )
            await engine.set_drafts(0, self.up_to)
        store_choice(self.key, checked)
        self.verdict = checked.verdict()
