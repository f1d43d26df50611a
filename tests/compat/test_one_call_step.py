"""The optimized engine's worker samples at the end of ``execute_model``: one call per step."""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest

from backend.chat.compare import path_differences
from backend.compat.speculation import one_call_step
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EngineConfig, EnginePath, engine_config
from backend.engine.protocol import EngineInfo


def _worker_module(pipeline: int = 1) -> types.ModuleType:
    """A module shaped like ``vllm.v1.worker.gpu_worker``: a Worker whose forward keeps its
    logits (answers None) unless told to answer, and whose ``sample_tokens`` records its calls."""

    class Worker:
        def __init__(self, answer: Any = None) -> None:
            parallel = types.SimpleNamespace(pipeline_parallel_size=pipeline)
            self.vllm_config = types.SimpleNamespace(parallel_config=parallel)
            self.answer = answer
            self.sampled: list[Any] = []

        def execute_model(self, scheduler_output: Any) -> Any:
            return self.answer

        def sample_tokens(self, grammar_output: Any) -> Any:
            self.sampled.append(grammar_output)
            return ("sampled", len(self.sampled))

    module = types.ModuleType("gpu_worker")
    module.Worker = Worker  # type: ignore[attr-defined]
    return module


def _step(structured: bool = False) -> Any:
    return types.SimpleNamespace(has_structured_output_requests=structured)


def test_the_worker_answers_a_step_with_its_sampled_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(one_call_step.ENV, "1")
    module = _worker_module()
    one_call_step.patch(module)
    worker = module.Worker()
    assert worker.execute_model(_step()) == ("sampled", 1), "sample_tokens(None) in the same call"
    assert worker.sampled == [None]
    assert worker.execute_model(_step(structured=True)) is None, "the core builds the bitmask"
    answered = module.Worker(answer="pooled")
    assert answered.execute_model(_step()) == "pooled" and answered.sampled == []
    one_call_step.patch(module)  # idempotent: wrapped once
    assert module.Worker.execute_model.__wrapped__.__name__ == "execute_model"
    assert not hasattr(module.Worker.execute_model.__wrapped__, "__wrapped__")


def test_pipeline_parallel_workers_and_other_paths_keep_two_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(one_call_step.ENV, "1")
    module = _worker_module(pipeline=2)
    one_call_step.patch(module)
    assert module.Worker().execute_model(_step()) is None
    monkeypatch.delenv(one_call_step.ENV)
    stock = _worker_module()
    one_call_step.patch(stock)
    assert stock.Worker().execute_model(_step()) is None, "no environment, no patch"


def test_vllm_still_skips_its_second_call_when_the_first_answers() -> None:
    """The contract the patch rests on, read from the installed vLLM: the core calls
    ``sample_tokens`` only when ``execute_model`` answered None, with the bitmask it built, and
    the bitmask is None for a step without structured output."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.gpu_worker import Worker

    step = inspect.getsource(EngineCore.step)
    assert "if model_output is None:" in step
    assert "model_output = self.model_executor.sample_tokens(grammar_output)" in step
    bitmask = inspect.getsource(Scheduler.get_grammar_bitmask)
    assert "if not scheduler_output.has_structured_output_requests:\n            return None" in bitmask
    assert {"execute_model", "sample_tokens"} <= set(vars(Worker))


def test_the_optimized_path_asks_for_it_on_a_cpu(tiny_source: ModelSource) -> None:
    settings = EngineSettings()
    optimized = engine_config(EnginePath.optimized(), tiny_source, settings)
    assert optimized.env[one_call_step.ENV].value == 1
    assert "no bit changes" in optimized.env[one_call_step.ENV].reason
    for path in (EnginePath.baseline(), EnginePath.eager()):
        assert one_call_step.ENV not in engine_config(path, tiny_source, settings).env
    baseline = engine_config(EnginePath.baseline(), tiny_source, settings)

    def info(config: EngineConfig) -> EngineInfo:
        return EngineInfo("tiny", 2048, frozenset({"text"}), config.engine_kwargs(), config.env_values())

    labels = [difference.label() for difference in path_differences(info(baseline), info(optimized))]
    assert "one worker call per step" in labels and "worker in the engine-core process" in labels
