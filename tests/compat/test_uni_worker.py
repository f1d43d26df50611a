"""The optimized CPU engine's worker computes inside the engine-core process, with exactly the
OpenMP environment vLLM gives its worker process (parity: tests/bench/test_bench.py,
tests/engine/paths/test_engine_paths.py)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from backend.compat.processes import uni_worker
from backend.config.settings import EngineSettings
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EnginePath, engine_config
from tests.support.engine_processes import engine_cores


def _config(backend: str, world_size: int = 1) -> Any:
    parallel = types.SimpleNamespace(distributed_executor_backend=backend, world_size=world_size)
    return types.SimpleNamespace(parallel_config=parallel)


def _platform_module() -> Any:
    class CpuPlatform:
        @classmethod
        def check_and_update_config(cls, vllm_config: Any) -> None:
            if vllm_config.parallel_config.distributed_executor_backend == "uni":
                vllm_config.parallel_config.distributed_executor_backend = "mp"  # as vLLM's CPU build

    return types.SimpleNamespace(CpuPlatform=CpuPlatform)


def test_the_platform_keeps_uni_only_where_the_engine_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _platform_module()
    uni_worker.patch_platform(module)
    for env, backend, world, expected in (
        ("1", "uni", 1, "uni"),
        (None, "uni", 1, "mp"),  # the baseline, started by the same process
        ("1", "uni", 2, "mp"),
        ("1", "mp", 1, "mp"),
    ):
        if env is None:
            monkeypatch.delenv(uni_worker.ENV, raising=False)
        else:
            monkeypatch.setenv(uni_worker.ENV, env)
        config = _config(backend, world)
        module.CpuPlatform.check_and_update_config(config)
        assert config.parallel_config.distributed_executor_backend == expected, (env, backend, world)


def test_the_optimized_path_asks_for_it_on_a_cpu(tiny_source: ModelSource) -> None:
    optimized = engine_config(EnginePath.optimized(), tiny_source, EngineSettings())
    baseline = engine_config(EnginePath.baseline(), tiny_source, EngineSettings())
    assert optimized.env_values()[uni_worker.ENV] == "1"
    assert optimized.engine_kwargs()["distributed_executor_backend"] == "uni"
    assert uni_worker.ENV not in baseline.env_values()
    assert "distributed_executor_backend" not in baseline.engine_kwargs()


@pytest.mark.engine
async def test_the_engine_core_is_bound_like_vllms_worker(
    path_engines: tuple[VllmEngine, VllmEngine],
) -> None:
    """Its OpenMP environment is vLLM's worker's (``configure_omp_envs``), applied by the OpenMP
    runtime when the process starts: the same cores as the baseline's worker process. (Its
    /proc environ cannot say: vLLM's process title overwrites it.)"""
    baseline, optimized = path_engines
    (baseline_core,) = engine_cores(baseline)
    (worker,) = baseline_core.children()  # vLLM's multiprocess executor's worker
    assert worker.name().startswith("VLLM::Worker")
    (core,) = engine_cores(optimized)
    assert core.children() == []  # no worker process: the model computes here
    assert core.cpu_affinity() == worker.cpu_affinity()
