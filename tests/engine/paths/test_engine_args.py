"""``engine_config``'s own bookkeeping (no engine started): what it computes once per engine."""

from __future__ import annotations

from typing import Any

import pytest

import backend.engine.cpu.env as cpu_env
import backend.engine.paths.engine_args as engine_args
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EnginePath, engine_config


def test_the_optimized_cpu_environment_is_computed_once_per_engine(
    tiny_source: ModelSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's environment and the key its speculation choice is kept under see one value."""
    monkeypatch.setattr(engine_args, "on_gpu", lambda: False)
    calls: list[EngineSettings] = []
    real = cpu_env.optimized_cpu_env

    def counted(settings: EngineSettings) -> Any:
        calls.append(settings)
        return real(settings)

    monkeypatch.setattr(cpu_env, "optimized_cpu_env", counted)
    monkeypatch.setattr(engine_args, "optimized_cpu_env", counted)
    config = engine_config(EnginePath.optimized(), tiny_source, EngineSettings())
    assert len(calls) == 1 and config.drafts is not None, "once, and the speculation keyed on it"
    calls.clear()
    engine_config(EnginePath.baseline(), tiny_source, EngineSettings())
    assert calls == [], "the baseline adds nothing"
