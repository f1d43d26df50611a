"""``gemma-chat bench``: both engine paths (and transformers' ``generate``) on the same workloads,
interleaved and repeated, with the parity verdict beside every speed-up.

Order: measure the machine's roofs (on a GPU in a child process, gone before any engine starts:
``backend.bench.roofs``); start every path's engine and warm each up (not measured);
then ``repetitions`` times, each workload on each path back to back, the order alternating
(A B, B A, A B, …) so that drift on the machine falls on both paths alike, each run from an empty
prefix cache, and each only once the engine that ran before it has stopped looking at its ring
(``backend.engine.local.quiet``: stock vLLM's worker holds a core for a second after a request). An
idle engine then spends no CPU, so both stay up; where the machine's free memory cannot hold a
second engine the paths run one after the other instead (and the report says so). Where both
paths would get identical engine arguments and environment only one engine runs: the report says that
nothing applies instead of measuring noise. Then the peer. The report compares the paths
request by request (tokens, every repetition) and workload by workload (figures).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from backend.bench.ablation import measure_ablations
from backend.bench.alone import batched, run_alone
from backend.bench.memory import PeakMemory
from backend.bench.options import BENCH_LOG, BenchOptions, Progress, is_throughput, within_batch_limits
from backend.bench.peer import run_peer
from backend.bench.report import BenchReport, PathRun
from backend.bench.request_sets import prompt_sets
from backend.bench.variants import attention_variants, measure_variants
from backend.bench.workload_runs import BenchPrompt, WorkloadRun, run_chat, run_sequential, run_throughput
from backend.bench.workloads import Workloads, load_workloads
from backend.config.settings import Settings
from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.local.quiet import settle, settle_s
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EngineConfig, EnginePath, engine_config
from backend.engine.paths.placement import plan_for
from backend.engine.platform import process_tree_rss, room_for_another
from backend.engine.protocol import Engine
from backend.engine.session.factory import remote_engine, server_for


def model_threads(settings: Settings, source: ModelSource) -> int:
    """Cores the optimized path computes on: vLLM's CPU build keeps one for its front end unless
    told not to, and gemma-chat's bfloat16 linear kernel (where it runs) uses that one too."""
    cores = os.cpu_count() or 1
    if settings.engine.cpu_all_cores or cores == 1:
        return cores
    from backend.engine.paths.engine_args import EnginePath, engine_config
    from backend.engine.platform import on_gpu
    from backend.kernels.env import THREADS_ENV as CPU_LINEAR_THREADS_ENV

    if on_gpu():
        return cores - 1
    optimized = engine_config(EnginePath.optimized(), source, settings.engine)
    kernel_threads = optimized.env.get(CPU_LINEAR_THREADS_ENV)
    return int(kernel_threads.value) if kernel_threads is not None else cores - 1


Runs = dict[str, dict[str, list[WorkloadRun]]]
"""Per path, per workload: one run per repetition."""


def path_configs(
    source: ModelSource, settings: Settings, options: BenchOptions, plan: MemoryPlan | None = None
) -> dict[str, EngineConfig]:
    """Each path's engine; on a GPU sized by the memory ``plan``."""
    configs = {}
    for path in options.paths:
        config = engine_config(EnginePath.named(path), source, settings.engine, 1, plan)
        if options.extra_args:
            config = replace(config, args={**config.args, **options.extra_args})
        configs[path] = config
    return configs


def same_configs(configs: dict[str, EngineConfig]) -> bool:
    """Every path starts its engine with identical arguments and environment."""
    shown = {(repr(c.engine_kwargs()), repr(sorted(c.env_values().items()))) for c in configs.values()}
    return len(configs) > 1 and len(shown) == 1


async def measure_paths(
    source: ModelSource,
    configs: dict[str, EngineConfig],
    options: BenchOptions,
    workloads: Workloads,
    progress: Progress,
    log_dir: Any,
    servers: Mapping[str, Engine] | None = None,
    plan: MemoryPlan | None = None,
) -> tuple[Runs, str]:
    """Start, warm and measure every path's engine (a path in ``servers`` runs on its server, not
    in process); the runs and how they were scheduled. On a GPU the memory ``plan`` decides: side
    by side, or one path after the other (host memory decides on a CPU)."""
    engines: dict[str, Engine] = {}
    runs: Runs = {}
    remote = dict(servers or {})

    async def start(name: str) -> Engine:
        if name in remote:
            progress(f"{name}: connecting to its server", 0, 1)
            await remote[name].start()
            progress(f"{name}: connecting to its server", 1, 1)
            return remote[name]
        return await _start(name, source, configs[name], progress, log_dir)

    try:
        names = list(configs)
        footprint = process_tree_rss()
        engines[names[0]] = await start(names[0])
        footprint = process_tree_rss() - footprint
        fits, room = room_for_another(footprint)
        if plan is not None:
            fits = plan.mode == "side-by-side"
        if len(names) == 1 or fits:
            for name in names[1:]:
                engines[name] = await start(name)
            for name in names:
                await warm_up(engines[name], name, options, workloads, progress)
            runs = await run_interleaved(engines, options, workloads, progress)
            await _alone_reference(engines, runs, options, workloads, progress)
            gpu = f"; on the GPU side by side, {plan.shares_text()}" if plan is not None else ""
            return runs, f"interleaved (A B, B A, …), each run {_settle_s(options):.1f} s after the last{gpu}"
        for name in names:
            if name not in engines:
                engines[name] = await start(name)
            await warm_up(engines[name], name, options, workloads, progress)
            runs.update(await run_interleaved({name: engines[name]}, options, workloads, progress))
            await _alone_reference({name: engines[name]}, runs, options, workloads, progress, names)
            await engines.pop(name).shutdown()
        schedule = (
            f"one path after the other: {room / 2**30:.1f} GiB free could not hold a second engine "
            f"of {footprint / 2**30:.1f} GiB"
        )
        if plan is not None:
            schedule = f"one path after the other: the GPU holds one engine; {plan.shares_text()}"
        return runs, schedule
    finally:
        for engine in engines.values():
            await engine.shutdown()


async def _alone_reference(
    engines: Mapping[str, Engine],
    runs: Runs,
    options: BenchOptions,
    workloads: Workloads,
    progress: Progress,
    paths: Sequence[str] = (),
) -> None:
    """Where both paths run, the baseline's batched requests once more, each alone (``alone``)."""
    both = "baseline" in engines and "baseline" in runs and "optimized" in {*engines, *paths}
    if not both or not batched(options):
        return
    progress("baseline: each batched request alone (the parity reference)", 0, 1)
    runs["baseline"].update(await run_alone(engines["baseline"], options, workloads))
    progress("baseline: each batched request alone (the parity reference)", 1, 1)


async def _start(
    path: str, source: ModelSource, config: EngineConfig, progress: Progress, log_dir: Any
) -> VllmEngine:
    engine = VllmEngine(source, config, log_path=log_dir / BENCH_LOG)
    progress(f"{path}: starting the engine", 0, 1)
    await engine.start()
    progress(f"{path}: starting the engine", 1, 1)
    return engine


async def run_interleaved(
    engines: Mapping[str, Engine], options: BenchOptions, workloads: Workloads, progress: Progress
) -> Runs:
    """``options.repetitions`` rounds; in each, every workload on every path back to back, the
    paths' order reversed every other round, each run after a pause for the one before it to go
    quiet (with several engines). The engines must be started and warmed up."""
    sets = prompt_sets(workloads, options)
    names = list(engines)
    runs: Runs = {name: {w: [] for w in options.workloads} for name in names}
    counters = _Counters(progress, sets, workloads, options)
    for rep in range(options.repetitions):
        order = names if rep % 2 == 0 else names[::-1]
        for workload in options.workloads:
            for name in order:
                await _cold(engines[name])
                if len(engines) > 1:
                    await settle(options.settle_s)
                tick = counters.ticker(f"{name}: {workload}", workload)
                run = await _run_workload(engines[name], name, workload, sets, workloads, options, tick, rep)
                runs[name][workload].append(run)
    return runs


def _settle_s(options: BenchOptions) -> float:
    return settle_s() if options.settle_s is None else options.settle_s


async def _cold(engine: Engine) -> None:
    """Every repetition starts from an empty prefix cache: else the second and later ones would
    measure the first one's cached prompts (within a repetition, a chat's turns still share it)."""
    forget = getattr(engine, "forget_cached_prompts", None)
    if forget is not None:
        await forget()


class _Counters:
    """Progress per ``path: workload`` stage, counted over all repetitions."""

    def __init__(
        self,
        progress: Progress,
        sets: dict[str, list[BenchPrompt]],
        workloads: Workloads,
        options: BenchOptions,
    ) -> None:
        self.progress, self.sets, self.workloads, self.options = progress, sets, workloads, options
        self.done: dict[str, int] = {}

    def ticker(self, stage: str, workload: str) -> Callable[[], None]:
        total = _requests_in(workload, self.sets, self.workloads, self.options) * self.options.repetitions
        self.done.setdefault(stage, 0)
        self.progress(stage, self.done[stage], total)

        def tick() -> None:
            self.done[stage] += 1
            self.progress(stage, self.done[stage], total)

        return tick


def _requests_in(
    name: str, sets: dict[str, list[BenchPrompt]], workloads: Workloads, options: BenchOptions
) -> int:
    if name == "chat":
        return sum(len(c.turns[: options.chat_turns]) for c in workloads.chat[: options.conversations])
    return len(sets[name])


async def warm_up(
    engine: Engine, path: str, options: BenchOptions, workloads: Workloads, progress: Progress
) -> None:
    """Not measured: the first requests pay one-time costs (allocation, lazy compilation, caches)."""
    sets = prompt_sets(workloads, options)
    progress(f"{path}: warm-up", 0, 1)
    noop = lambda: None  # noqa: E731
    warm = sets["throughput"][: min(4, options.requests)]
    await run_throughput(engine, "warm-up", warm, 8, noop, tag="warm-")
    if "media" in options.workloads and sets["media"]:
        await run_sequential(engine, "warm-up", "media", sets["media"][:1], 4, noop, tag="warm-")
    progress(f"{path}: warm-up", 1, 1)


async def _run_workload(
    engine: Engine,
    path: str,
    name: str,
    sets: dict[str, list[BenchPrompt]],
    workloads: Workloads,
    options: BenchOptions,
    tick: Callable[[], None],
    rep: int,
) -> WorkloadRun:
    tag = f"r{rep}-"
    if is_throughput(name):
        return await run_throughput(engine, path, sets[name], options.max_tokens, tick, tag)
    if name == "chat":
        conversations = [
            (c.id, c.turns[: options.chat_turns]) for c in workloads.chat[: options.conversations]
        ]
        return await run_chat(engine, path, conversations, options.chat_max_tokens, tick, tag)
    return await run_sequential(engine, path, name, sets[name], options.max_tokens, tick, tag)


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
    options = replace(options, settle_s=_settle_s(options))  # the report names the pause it used
    model_config = json.loads((source.path / "config.json").read_text())
    dtype = bench_dtype(settings, model_config)
    threads = model_threads(settings, source)
    progress("measuring this machine's roofs", 0, 1)
    from backend.engine.platform import on_gpu

    device = "cuda" if on_gpu() else "cpu"
    roofs = await asyncio.to_thread(measure_roofs, dtype, threads, device, options.roof_seconds)
    progress("measuring this machine's roofs", 1, 1)
    step_costs = None
    if options.step_costs:
        from backend.bench.step_costs import run_step_costs

        step_costs = await run_step_costs(source, settings, options, log_dir, progress)
    plan = plan_for(source, settings.engine) if device == "cuda" else None
    configs = path_configs(source, settings, options, plan)
    options = within_batch_limits(options, configs, progress)
    urls = {name: url for name in configs if (url := server_for(settings, name))}
    servers = {name: remote_engine(settings, url, name) for name, url in urls.items()}
    same = same_paths(configs, urls)
    measured = dict(list(configs.items())[:1]) if same else configs
    with PeakMemory() as memory:
        runs, schedule = (
            await measure_paths(source, measured, options, workloads, progress, log_dir, servers, plan)
            if options.workloads
            else ({name: {} for name in measured}, "no workloads: step costs only")
        )
    remote = bool(servers)
    ablated = await measure_ablations(
        source,
        settings.engine,
        options,
        measured,
        plan,
        remote,
        lambda alone: measure_variants(
            source, alone, options, workloads, progress, log_dir, warm_up, run_interleaved
        ),
    )
    variants = await attention_variants(
        source,
        settings,
        options,
        configs,
        plan,
        remote,
        workloads,
        progress,
        log_dir,
        warm_up,
        run_interleaved,
    )
    paths = {
        name: PathRun(name, runs[name], *_path_setup(name, config, servers))
        for name, config in measured.items()
    }
    peer = None
    if not servers and options.workloads:  # transformers runs here: for in-process paths only
        rendered = _rendered_prompts(source, workloads, options)
        peer = await asyncio.to_thread(run_peer, source, settings, options, rendered, progress, dtype)
    costs = model_costs(model_config, dtype)
    return BenchReport.build(
        source,
        settings,
        options,
        roofs,
        costs,
        paths,
        peer,
        memory_gib=memory.peak_gib,
        same_paths=same,
        schedule=schedule,
        remote=remote,
        step_costs=step_costs,
        variants=variants,
        ablations=ablated,
    )


def same_paths(configs: dict[str, EngineConfig], urls: dict[str, str]) -> bool:
    """Both paths would run the same engine: identical in-process configurations, or one server."""
    if not urls:
        return same_configs(configs)
    return len(urls) == len(configs) > 1 and len(set(urls.values())) == 1


def _path_setup(
    name: str, config: EngineConfig, servers: Mapping[str, Engine]
) -> tuple[dict[str, Any], dict[str, str]]:
    """What a path ran with: its engine arguments and environment, or its server's description."""
    server = servers.get(name)
    if server is None:
        return config.engine_kwargs(), config.env_values()
    return dict(getattr(server, "described", {})), {}


def _rendered_prompts(
    source: ModelSource, workloads: Workloads, options: BenchOptions
) -> dict[str, list[str]]:
    from backend.gemma4.messages import PromptRenderer

    renderer = PromptRenderer.for_model(str(source.path))
    sets = prompt_sets(workloads, options)
    return {
        name: [renderer.render(list(p.messages)).text for p in sets[name]]
        for name in ("throughput", "single")
    }
