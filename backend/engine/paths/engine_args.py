"""The vLLM arguments each engine path implies on this machine: ``engine_config(path, source,
settings)`` returns the keyword arguments for vLLM's ``AsyncEngineArgs`` plus the environment the
engine's processes need, each with the reason it differs from vLLM's defaults — what every engine
gets, then a CPU's (``_on_cpu``) or a GPU's (``_on_gpu``). The values themselves are in
``backend.engine.paths.values``, the speculation in ``backend.engine.paths.speculative``.
"""

from __future__ import annotations

from typing import Any

from backend.config.settings import EngineSettings
from backend.config.switch_rules import DRAFT_SCHEDULE as DRAFT_SCHEDULE_ENV
from backend.config.switch_rules import LIVE_SPEC_METRICS as LIVE_SPEC_METRICS_ENV
from backend.config.switch_rules import NO_PREFILL_DRAFTS as NO_PREFILL_DRAFTS_ENV
from backend.config.switch_rules import ROW_EXACT_KERNEL
from backend.config.switch_rules import UNI_WORKER as UNI_WORKER_ENV
from backend.engine.argument import Argument
from backend.engine.cpu.env import optimized_cpu_env, speculating_cpu_env
from backend.engine.cpu.kv_size import cpu_kv_cache, cpu_window
from backend.engine.gpu.args import exact_attention, gpu_arguments, gpu_env
from backend.engine.gpu.card import GpuRefused
from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.gpu.serve_limits import serve_limits
from backend.engine.gpu.window import card_window
from backend.engine.model.source import ModelSource
from backend.engine.paths.gpu_batch import gpu_draft_schedule, graph_config
from backend.engine.paths.speculative import (
    CPU_SPECULATION_MAX_BATCH,
    Speculative,
    cpu_speculation_schedule,
    optimized_speculation,
    speculative,
)
from backend.engine.paths.values import PATH_NAMES, EngineConfig, EnginePath, PathName
from backend.engine.platform import on_gpu
from backend.engine.speculation.choice import SpeculationChoice
from backend.engine.speculation.first_start import DraftPlan

__all__ = ["PATH_NAMES", "Argument", "EngineConfig", "EnginePath", "PathName", "engine_config"]

Args = dict[str, Argument]
WINDOW_FROM_MEMORY = "context window chosen from this machine's memory"


def engine_config(
    path: EnginePath,
    source: ModelSource,
    settings: EngineSettings,
    engines_sharing_gpu: int = 1,
    plan: MemoryPlan | None = None,
) -> EngineConfig:
    """``plan``: the GPU memory plan (this machine's or a described GPU's); it makes the arguments
    a GPU's, with this path's share, wherever they are computed."""
    gpu = plan is not None or on_gpu()
    if settings.exact and not gpu:
        raise GpuRefused(
            "exact = true needs a GPU: vLLM's batch-invariant mode launches Triton kernels, and the CPU "
            "build dies on the first request with it.",
            "Unset exact (on the CPU compare's tokens come from the same kernels on both paths anyway).",
        )
    args: Args = {
        "model": Argument(str(source.path), "the resolved checkpoint directory"),
        "dtype": Argument(settings.dtype, "from settings (auto = the checkpoint's dtype)"),
        "seed": Argument(settings.seed, "fixed, so greedy runs repeat"),
        "disable_log_stats": Argument(False, "request metrics are read from the engine"),
        "limit_mm_per_prompt": Argument(
            {"image": 4, "audio": 2, "video": 1}, "bounds the memory vLLM plans for media"
        ),
    }
    if settings.max_model_len is not None:
        args["max_model_len"] = Argument(settings.max_model_len, "context window from settings")
    if gpu:
        return _on_gpu(path, source, settings, args, engines_sharing_gpu, plan)
    return _on_cpu(path, source, settings, args)


def _on_gpu(
    path: EnginePath,
    source: ModelSource,
    settings: EngineSettings,
    args: Args,
    engines_sharing_gpu: int,
    plan: MemoryPlan | None,
) -> EngineConfig:
    """A GPU's engine: the window and share from the memory plan, the batch limits `vllm serve` uses
    on the card (both paths), the optimized path's drafts by load, exact mode's kernels, a measured
    attention backend."""
    env: Args = {}
    if plan is not None:
        if "max_model_len" not in args:
            window = card_window(source.path, settings.dtype, plan)
            args["max_model_len"] = Argument(window.tokens, window.why)
        args.update(gpu_arguments(plan, path.name))
        env.update(gpu_env(settings))
        args.update(serve_limits(plan.gpu).arguments(plan.gpu.name))
    else:
        if "max_model_len" not in args:
            window_tokens = cpu_window(source.path, None)
            args["max_model_len"] = Argument(window_tokens, WINDOW_FROM_MEMORY)
        share = settings.gpu_memory_utilization / engines_sharing_gpu
        args["gpu_memory_utilization"] = Argument(
            round(share, 3), f"this engine's share of GPU memory (settings / {engines_sharing_gpu} engines)"
        )
        env.update(gpu_env(settings))
    if path.enforce_eager:
        args["enforce_eager"] = Argument(True, "no torch.compile (diagnosis path)")
    exact = exact_attention(settings)
    if exact is not None:
        args["attention_config"] = exact
    notes: tuple[str, ...] = ()
    measured: SpeculationChoice | None = None
    if path == EnginePath.optimized():
        spec, notes, measured, _ = optimized_speculation(source, settings, True)
        # exact mode keeps both paths on Triton's batch-invariant kernels (compare's line says so)
        if not settings.exact and measured is not None and (attention := measured.attention_config()):
            base = dict(exact.value) if exact is not None else {}
            args["attention_config"] = Argument(
                {**base, **attention},
                f"measured here with this speculation: {measured.attention_speedup:.2f}x over vLLM's own "
                "attention, the same greedy tokens (paths --measure)",
            )
    else:
        spec = speculative(path, source, True)
    if spec is not None:
        config, why = spec
        if plan is not None and path.name == "optimized":
            schedule, schedule_why = gpu_draft_schedule(
                int(config["num_speculative_tokens"]), int(args["max_num_seqs"].value), measured
            )
            config = {**config, "num_speculative_tokens_per_batch_size": schedule}
            why += schedule_why
            if not path.enforce_eager:
                graphs, graphs_why = graph_config(
                    int(args["max_num_seqs"].value),
                    int(config["num_speculative_tokens"]),
                    int(args["max_num_batched_tokens"].value),
                )
                args["compilation_config"] = Argument(graphs, graphs_why)
            env[DRAFT_SCHEDULE_ENV] = Argument(
                1,
                "the number of drafts a step proposes can be set while the engine runs: "
                "`paths --measure` measures drafts by load on this engine (drafts never change a token)",
            )
            env[NO_PREFILL_DRAFTS_ENV] = Argument(
                1,
                "a step that asks for no drafts (above the busy threshold) runs no drafter pass for "
                "nothing (Model Runner V2, a card's runner, runs the drafter's first pass before it "
                "checks; drafts never change a token)",
            )
        _speculating(path, args, env, config, why)
    return EngineConfig(path=path, args=args, env=env, notes=notes, drafts=None)


def _on_cpu(path: EnginePath, source: ModelSource, settings: EngineSettings, args: Args) -> EngineConfig:
    """A CPU's engine: the window and KV cache from this machine's memory, the optimized path's
    kernel, worker and environment, and drafts that stop above a few running requests (how many a
    step proposes decided at the first start: ``DraftPlan``)."""
    if "max_model_len" not in args:
        args["max_model_len"] = Argument(cpu_window(source.path, None), WINDOW_FROM_MEMORY)
    args["kv_cache_memory_bytes"] = cpu_kv_cache(
        settings.kv_cache_gib, source.path, int(args["max_model_len"].value), settings.dtype, source.drafter
    )
    args["skip_mm_profiling"] = Argument(
        True,
        "the start runs no image, audio or video through the encoders to size memory: the CPU "
        "engine's KV cache has a set size (measured: profiling a video took 67 s of a 2-minute "
        "warm start at E2B's size); the first media request runs the encoder then",
    )
    if path.enforce_eager:
        args["enforce_eager"] = Argument(True, "no torch.compile (diagnosis path)")
    env: Args = {}
    notes: tuple[str, ...] = ()
    measured: SpeculationChoice | None = None
    drafts: DraftPlan | None = None
    spec: Speculative
    cpu_env, cpu_notes = optimized_cpu_env(settings) if path.name == "optimized" else ({}, ())
    if path == EnginePath.optimized():
        spec, notes, measured, drafts = optimized_speculation(source, settings, False, cpu_env)
    else:
        spec = speculative(path, source, False)
    if spec is None:
        drafts = None
    else:
        config, why = spec
        schedule = cpu_speculation_schedule(config, drafts is not None)
        config = {**config, "num_speculative_tokens_per_batch_size": schedule}
        if drafts is not None and measured is not None and measured.by_load is not None:
            why += measured.by_load_text(figures=False)
        else:
            why += f"; off above {CPU_SPECULATION_MAX_BATCH} running requests (CPU is compute-bound there)"
        if drafts is not None:
            why += (
                f"; at most {drafts.most} drafts: how many a step proposes (0 to {drafts.most}) is "
                "set on the running engine by what this path's first start here measured"
            )
        _speculating(path, args, env, config, why)
        if path.name == "optimized":
            env.update(speculating_cpu_env(ROW_EXACT_KERNEL in cpu_env))
    if path.name == "optimized":
        env.update(cpu_env)
        notes = (*notes, *cpu_notes)
        if UNI_WORKER_ENV in cpu_env:
            args["distributed_executor_backend"] = Argument(
                "uni", "the worker inside the engine-core process (GEMMA_CHAT_UNI_WORKER, below)"
            )
    return EngineConfig(path=path, args=args, env=env, notes=notes, drafts=drafts)


def _speculating(path: EnginePath, args: Args, env: Args, config: dict[str, Any], why: str) -> None:
    """What a speculating engine gets on any device: its ``speculative_config``, per-step draft
    records, and on the optimized path the live acceptance figures."""
    if path.name == "optimized":  # on a CPU and a GPU alike
        env[LIVE_SPEC_METRICS_ENV] = Argument(
            1,
            "each streamed output carries the engine's count of drafts and accepted drafts so far "
            "(vLLM sends it only with the finished reply): the footer shows acceptance while the "
            "reply streams",
        )
    args["speculative_config"] = Argument(config, why)
    args["per_request_spec_decode_metrics"] = Argument(
        "detailed", "drafted/accepted per reply and per step (the accepted-draft view)"
    )
