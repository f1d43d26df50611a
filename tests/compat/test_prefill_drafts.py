"""A step of prefills answers without drafting, so the first token does not wait for drafts.

The real engine's side (the patch live in the optimized engine's worker, tokens identical to the
baseline's with MTP drafting) is checked in tests/bench/test_bench.py.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest

from backend.chat.compare import ENV_LABELS
from backend.compat.speculation import prefill_drafts
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EnginePath, engine_config


def test_a_step_is_prefills_only_when_no_request_decodes() -> None:
    assert prefill_drafts.prefills_only({"a": 40}, {})
    assert prefill_drafts.prefills_only({"a": 40, "b": 7}, {})
    assert not prefill_drafts.prefills_only({"a": 1}, {}), "a decode step"
    assert not prefill_drafts.prefills_only({"a": 4}, {"a": [5, 6, 7]}), "verifying 3 drafts"
    assert not prefill_drafts.prefills_only({"a": 40, "b": 1}, {}), "b decodes: it keeps its drafts"
    assert prefill_drafts.prefills_only({"a": 5}, {"a": [5, 6, 7]}), "more than a verification"
    assert not prefill_drafts.prefills_only({}, {})


def _runner_module() -> types.ModuleType:
    class GPUModelRunner:
        def __init__(self) -> None:
            self.input_batch = types.SimpleNamespace(req_ids=["a", "b"])
            self.proposed: list[Any] = []

        def propose_draft_token_ids(self, scheduler_output: Any, sampled: Any, *rest: Any) -> Any:
            self.proposed.append(sampled)
            return "drafts"

    module = types.ModuleType("gpu_model_runner")
    module.GPUModelRunner = GPUModelRunner  # type: ignore[attr-defined]
    return module


def _step(scheduled: dict[str, int], spec: dict[str, list[int]] | None = None, asked: int = 2) -> Any:
    return types.SimpleNamespace(
        num_scheduled_tokens=scheduled,
        scheduled_spec_decode_tokens=spec or {},
        num_spec_tokens_to_schedule=asked,
    )


def test_the_runner_skips_the_drafter_on_a_step_of_prefills(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefill_drafts.ENV, "1")
    module = _runner_module()
    prefill_drafts.patch(module)
    runner = module.GPUModelRunner()
    assert runner.propose_draft_token_ids(_step({"a": 30, "b": 12}), "tokens") == [[], []]
    assert runner.proposed == [], "the drafter did not run"
    assert runner.propose_draft_token_ids(_step({"a": 30, "b": 1}), "tokens", None) == "drafts"
    verifying = _step({"a": 3, "b": 3}, {"a": [1, 2], "b": [3, 4]})
    assert runner.propose_draft_token_ids(verifying, "t") == "drafts"
    assert runner.proposed == ["tokens", "t"]
    eight = _step(dict.fromkeys("abcdefgh", 1), asked=0)
    assert runner.propose_draft_token_ids(eight, "t8") == [[], []], "the schedule asked for no drafts"
    assert runner.proposed == ["tokens", "t"], "so the drafter did not run"
    prefill_drafts.patch(module)  # idempotent: wrapped once
    assert not hasattr(module.GPUModelRunner.propose_draft_token_ids.__wrapped__, "__wrapped__")
    monkeypatch.delenv(prefill_drafts.ENV)
    stock = _runner_module()
    prefill_drafts.patch(stock)
    assert stock.GPUModelRunner().propose_draft_token_ids(_step({"a": 30}), "t") == "drafts"


def test_vllm_still_takes_drafts_the_way_the_patch_answers() -> None:
    """The contract, read from the installed vLLM: the runner stores what
    ``propose_draft_token_ids`` returns, hands a list of per-request lists to the engine core as it
    is (the ngram drafter's form), and the scheduler takes an empty list as no drafts."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    sample = inspect.getsource(GPUModelRunner.sample_tokens)
    call = "self._draft_token_ids = self.propose_draft_token_ids(\n                    scheduler_output,"
    assert call in sample
    take = inspect.getsource(GPUModelRunner._get_draft_token_ids_cpu)
    assert "if isinstance(self._draft_token_ids, list):\n            return self._draft_token_ids" in take
    update = inspect.getsource(Scheduler.update_draft_token_ids)
    assert "request.spec_token_ids = self.structured_output_manager.validate_tokens(" in update
    asked = "num_spec_tokens_to_schedule = scheduler_output.num_spec_tokens_to_schedule"
    assert asked in inspect.getsource(GPUModelRunner.propose_draft_token_ids), "the drafts a step asks for"
    fields = inspect.signature(GPUModelRunner.propose_draft_token_ids).parameters
    assert list(fields)[:2] == ["self", "scheduler_output"]


def test_the_optimized_path_asks_for_it_only_when_it_speculates(tiny_source: ModelSource) -> None:
    mtp = EngineSettings(speculation="mtp")
    optimized = engine_config(EnginePath.optimized(), tiny_source, mtp)
    assert "speculative_config" in optimized.args
    assert optimized.env[prefill_drafts.ENV].value == 1
    assert "never change a token" in optimized.env[prefill_drafts.ENV].reason
    assert ENV_LABELS[f"env {prefill_drafts.ENV}"] == "first token before drafts"
    plain = engine_config(EnginePath.optimized(), tiny_source, EngineSettings(speculation="none"))
    assert prefill_drafts.ENV not in plain.env, "nothing to skip without a drafter"
    for path in (EnginePath.baseline(), EnginePath.eager()):
        assert prefill_drafts.ENV not in engine_config(path, tiny_source, mtp).env


def test_vllms_own_v1_runner_runs_no_drafter_on_a_step_asking_for_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM's real V1 ``GPUModelRunner`` (what the CPU runner inherits, and V1 on a card): patched
    in a module of its own, a step of running requests that asks for no drafts answers empty
    drafts without entering vLLM's ``propose_draft_token_ids``; unpatched, vLLM's own goes to work
    on the step (and stops on this bare runner, which has no drafter)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    monkeypatch.setenv(prefill_drafts.ENV, "1")
    module = types.ModuleType("gpu_model_runner")
    module.GPUModelRunner = type("GPUModelRunner", (GPUModelRunner,), {})  # type: ignore[attr-defined]
    prefill_drafts.patch(module)
    runner = module.GPUModelRunner.__new__(module.GPUModelRunner)
    runner.input_batch = types.SimpleNamespace(req_ids=["a", "b", "c"])
    busy = _step({"a": 1, "b": 1, "c": 1}, asked=0)
    rest = (None,) * 7  # sampling metadata, hidden states, ...: the runner's own call passes them
    assert runner.propose_draft_token_ids(busy, [[5], [6], [7]], *rest) == [[], [], []]
    with pytest.raises(AttributeError, match="total_num_scheduled_tokens"):
        GPUModelRunner.propose_draft_token_ids(runner, busy, [[5], [6], [7]], *rest)
    runner.use_async_scheduling = True  # V1 on a card: the next step reads the drafts as a tensor
    with pytest.raises(AttributeError, match="total_num_scheduled_tokens"):
        runner.propose_draft_token_ids(busy, [[5], [6], [7]], *rest)
