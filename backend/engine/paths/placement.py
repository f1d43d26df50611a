"""The memory plan for a resolved model under the settings, on this machine's GPU or a described
one: the refusals that hold before any engine starts, then ``memory_plan.plan_memory``; on the CPU
build, the host-memory plan (``host_plan``) from each path's measured or estimated footprint."""

from __future__ import annotations

import json

from backend.config.settings import EngineSettings
from backend.engine.cpu.host_plan import HostPlan, estimated_footprint, plan_host
from backend.engine.gpu.attention import check_flashinfer_kernels
from backend.engine.gpu.card import GpuFacts, check_dtype, check_gpu, detect_gpu
from backend.engine.gpu.memory_plan import MemoryPlan, plan_memory
from backend.engine.gpu.window import plan_tokens
from backend.engine.model.footprint import engine_footprint
from backend.engine.model.source import DEMO_NAME, ModelSource


def context_tokens(source: ModelSource, settings: EngineSettings) -> int:
    """The window the plan sizes each engine's KV cache for: the setting, else the least a card's
    window may be (``gpu_window``; the window itself follows from the share the plan gives)."""
    if settings.max_model_len is not None:
        return settings.max_model_len
    return plan_tokens(source.path)


def model_type(source: ModelSource) -> str:
    return str(json.loads((source.path / "config.json").read_text()).get("model_type", ""))


def uses_drafter(source: ModelSource, settings: EngineSettings) -> bool:
    return source.drafter is not None and settings.speculation in ("auto", "mtp")


def plan_for(source: ModelSource, settings: EngineSettings, gpu: GpuFacts | None = None) -> MemoryPlan | None:
    """The plan on ``gpu`` (default: this machine's; None where there is no GPU). Raises
    ``GpuRefused`` for a card below compute capability 8.0, float16 for Gemma 4, FlashInfer without
    its precompiled kernels where vLLM runs every layer on it, or a model that does not fit."""
    sleep, host = True, None
    if gpu is None:
        gpu = detect_gpu()
        if gpu is None:
            return None
        import psutil
        from vllm.platforms import current_platform

        sleep = bool(current_platform.is_sleep_mode_available())
        host = int(psutil.virtual_memory().total)
    check_gpu(gpu)
    check_dtype(settings.dtype, model_type(source), gpu)
    check_flashinfer_kernels(gpu, settings.exact)
    tokens = context_tokens(source, settings)
    drafter = source.drafter if uses_drafter(source, settings) else None
    footprints = {
        "baseline": engine_footprint(source.path, None, tokens, settings.dtype),
        "optimized": engine_footprint(source.path, drafter, tokens, settings.dtype),
    }
    return plan_memory(gpu, footprints, settings.gpu_memory_utilization, settings.both_paths, sleep, host)


def host_plan_for(source: ModelSource, settings: EngineSettings) -> HostPlan:
    """The plan for both paths' CPU engines in this machine's RAM; raises ``HostRefused`` where not
    even one fits."""
    from backend.engine.cpu import footprints
    from backend.engine.cpu.kv_size import cpu_kv_cache, cpu_window

    window = cpu_window(source.path, settings.max_model_len)
    kv = int(cpu_kv_cache(settings.kv_cache_gib, source.path, window, settings.dtype, source.drafter).value)
    sizes = {}
    for path, drafter in (
        ("baseline", None),
        ("optimized", source.drafter if uses_drafter(source, settings) else None),
    ):
        entry = footprints.key(source.path, drafter, path, kv)
        sizes[path] = footprints.recorded(entry) or estimated_footprint(
            source.path, drafter, kv, settings.dtype
        )
    return plan_host(sizes, settings.both_paths, demo=source.name == DEMO_NAME)
