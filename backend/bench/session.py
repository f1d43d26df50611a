"""``gemma-chat bench``: both engine paths (and transformers' ``generate``) on the same workloads,
one path at a time, with the parity verdict beside every speed-up.

Order: measure the machine's roofs, then for each path start its engine, warm it up (not
measured), run every chosen workload, record peak memory, shut it down; then the peer. The
report compares them request by request (tokens) and workload by workload (figures).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from typing import Any

from backend.bench.memory import PeakMemory
from backend.bench.options import BenchOptions, Progress
from backend.bench.report import BenchReport, PathRun, PeerRun
from backend.bench.workload_runs import BenchPrompt, WorkloadRun, run_chat, run_sequential, run_throughput
from backend.bench.workloads import Workloads, load_workloads
from backend.engine.model_source import ModelSource
from backend.engine.profiles import EngineProfile, engine_config
from backend.engine.vllm import VllmEngine
from backend.messages import ChatMessage
from backend.settings import Settings


def model_threads(settings: Settings, source: ModelSource) -> int:
    """Cores the optimized path computes on: vLLM's CPU build keeps one for its front end unless
    told not to, and gemma-chat's bfloat16 linear kernel (where it runs) uses that one too."""
    cores = os.cpu_count() or 1
    if settings.engine.cpu_all_cores or cores == 1:
        return cores
    from backend.engine.platform import on_gpu
    from backend.engine.profiles import EngineProfile, engine_config
    from backend.kernels.env import THREADS_ENV as CPU_LINEAR_THREADS_ENV

    if on_gpu():
        return cores - 1
    optimized = engine_config(EngineProfile.optimized(), source, settings.engine)
    kernel_threads = optimized.env.get(CPU_LINEAR_THREADS_ENV)
    return int(kernel_threads.value) if kernel_threads is not None else cores - 1


def prompt_sets(workloads: Workloads, options: BenchOptions) -> dict[str, list[BenchPrompt]]:
    def user(text: str) -> tuple[ChatMessage, ...]:
        return (ChatMessage("user", text),)

    throughput = [BenchPrompt(p.id, user(p.text)) for p in workloads.throughput]
    repeated = [throughput[i % len(throughput)] for i in range(options.requests)]
    unique = [replace(p, id=f"{p.id}#{i}") for i, p in enumerate(repeated)]
    single = throughput[-options.single_requests :]
    chosen = []
    for kind in dict.fromkeys(m.media.kind for m in workloads.media):
        chosen += [m for m in workloads.media if m.media.kind == kind][: options.media_per_kind]
    media = [
        BenchPrompt(m.id, (ChatMessage("user", m.text, media=(m.media.kind,)),), m.multi_modal_data())  # type: ignore[arg-type]
        for m in chosen
    ]
    return {"throughput": unique, "single": single, "media": media}


async def run_path(
    path: str,
    source: ModelSource,
    settings: Settings,
    options: BenchOptions,
    workloads: Workloads,
    progress: Progress,
    log_dir: Any,
) -> PathRun:
    """Start the path's engine, measure it, shut it down (one path at a time: no shared cores)."""
    config = engine_config(EngineProfile.named(path), source, settings.engine)
    if options.extra_args:
        config = replace(config, args={**config.args, **options.extra_args})
    engine = VllmEngine(source, config, log_path=log_dir / f"bench-{path}.log")
    with PeakMemory() as memory:
        progress(f"{path}: starting the engine", 0, 1)
        await engine.start()
        try:
            progress(f"{path}: starting the engine", 1, 1)
            runs = await run_workloads(engine, path, options, workloads, progress)
        finally:
            await engine.shutdown()
    return PathRun(path, runs, config.engine_kwargs(), config.env_values(), memory.peak_gib)


async def run_workloads(
    engine: VllmEngine, path: str, options: BenchOptions, workloads: Workloads, progress: Progress
) -> dict[str, WorkloadRun]:
    """Warm-up (not measured), then each chosen workload on a started engine."""
    sets = prompt_sets(workloads, options)
    await _warm_up(engine, sets, options, progress, path)
    return {
        name: await _run_workload(engine, path, name, sets, workloads, options, progress)
        for name in options.workloads
    }


async def _warm_up(
    engine: VllmEngine,
    sets: dict[str, list[BenchPrompt]],
    options: BenchOptions,
    progress: Progress,
    path: str,
) -> None:
    """Not measured: the first requests pay one-time costs (allocation, lazy compilation, caches)."""
    progress(f"{path}: warm-up", 0, 1)
    noop = lambda: None  # noqa: E731
    warm = [replace(p, id=f"warm-{p.id}") for p in sets["throughput"][: min(4, options.requests)]]
    await run_throughput(engine, "warm-up", warm, 8, noop)
    if "media" in options.workloads and sets["media"]:
        await run_sequential(
            engine, "warm-up", "media", [replace(sets["media"][0], id="warm-media")], 4, noop
        )
    progress(f"{path}: warm-up", 1, 1)


async def _run_workload(
    engine: VllmEngine,
    path: str,
    name: str,
    sets: dict[str, list[BenchPrompt]],
    workloads: Workloads,
    options: BenchOptions,
    progress: Progress,
) -> WorkloadRun:
    stage = f"{path}: {name}"
    if name == "chat":
        conversations = [
            (c.id, c.turns[: options.chat_turns]) for c in workloads.chat[: options.conversations]
        ]
        total = sum(len(turns) for _, turns in conversations)
    else:
        total = len(sets[name])
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(stage, done[0], total)

    progress(stage, 0, total)
    if name == "throughput":
        return await run_throughput(engine, path, sets[name], options.max_tokens, tick)
    if name == "chat":
        return await run_chat(engine, path, conversations, options.chat_max_tokens, tick)
    return await run_sequential(engine, path, name, sets[name], options.max_tokens, tick)


def run_peer(
    source: ModelSource,
    settings: Settings,
    options: BenchOptions,
    rendered: dict[str, list[str]],
    progress: Progress,
    dtype: str,
) -> PeerRun | None:
    """transformers' ``generate`` on ``throughput`` (one batch) and ``single`` (one at a time)."""
    from backend.bench.peer import run_transformers_generate, run_transformers_single

    wanted = [w for w in ("throughput", "single") if w in options.workloads and rendered.get(w)]
    if not options.peer or not wanted:
        return None
    threads = os.cpu_count() or 1  # transformers as a user runs it: every core
    peer = PeerRun(dtype=dtype, threads=threads)
    if "throughput" in wanted:
        progress("transformers: throughput", 0, 1)
        prompts = rendered["throughput"]
        peer.throughput = run_transformers_generate(
            str(source.path), prompts, options.max_tokens, len(prompts), dtype, threads
        )
        progress("transformers: throughput", 1, 1)
    if "single" in wanted:
        progress("transformers: single", 0, 1)
        peer.single = run_transformers_single(
            str(source.path), rendered["single"], options.max_tokens, dtype, threads
        )
        progress("transformers: single", 1, 1)
    return peer


def bench_dtype(settings: Settings, config: dict[str, Any]) -> str:
    """The dtype every path (and the peer) computes in: the setting, or the checkpoint's own."""
    from backend.bench.model_costs import config_dtype

    return settings.engine.dtype if settings.engine.dtype != "auto" else config_dtype(config)


async def run_bench(
    source: ModelSource, settings: Settings, options: BenchOptions, progress: Progress, log_dir: Any
) -> BenchReport:
    from backend.bench.model_costs import model_costs
    from backend.bench.roofs import measure_roofs

    workloads = load_workloads()
    config = json.loads((source.path / "config.json").read_text())
    dtype = bench_dtype(settings, config)
    threads = model_threads(settings, source)
    progress("measuring this machine's roofs", 0, 1)
    from backend.engine.platform import on_gpu

    device = "cuda" if on_gpu() else "cpu"
    roofs = await asyncio.to_thread(measure_roofs, dtype, threads, device, options.roof_seconds)
    progress("measuring this machine's roofs", 1, 1)
    paths: dict[str, PathRun] = {}
    for path in options.paths:
        paths[path] = await run_path(path, source, settings, options, workloads, progress, log_dir)
    rendered = _rendered_prompts(source, workloads, options)
    peer = await asyncio.to_thread(run_peer, source, settings, options, rendered, progress, dtype)
    return BenchReport.build(source, settings, options, roofs, model_costs(config, dtype), paths, peer)


def _rendered_prompts(
    source: ModelSource, workloads: Workloads, options: BenchOptions
) -> dict[str, list[str]]:
    from backend.messages import PromptRenderer

    renderer = PromptRenderer.for_model(str(source.path))
    sets = prompt_sets(workloads, options)
    return {
        name: [renderer.render(list(p.messages)).text for p in sets[name]]
        for name in ("throughput", "single")
    }
