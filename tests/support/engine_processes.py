"""One engine's own processes, from vLLM's process manager (other engines of the test session run
beside it: a test must not touch theirs)."""

from __future__ import annotations

import psutil

from backend.engine.local.vllm import VllmEngine


def engine_cores(engine: VllmEngine) -> list[psutil.Process]:
    """The engine-core processes vLLM started for ``engine``."""
    manager = engine._llm.engine_core.resources.engine_manager
    return [psutil.Process(p.pid) for p in manager.processes]
