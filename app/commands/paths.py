"""``gemma-chat paths``: every engine path, every vLLM argument it sets, and why."""

from __future__ import annotations

import argparse
import asyncio
import json

from app.commands.flags import settings_from_args
from backend.config import locations, switch_rules
from backend.config.settings import EngineSettings, Settings
from backend.engine.cpu.host_plan import HostRefused
from backend.engine.gpu.attention import ModelAttention, attention_candidates, expected_attention
from backend.engine.gpu.card import GpuRefused, described_gpu, parse_capability
from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.local.log import capture_stderr
from backend.engine.model.source import DEFAULT_MODEL, ModelSource, described_default_model
from backend.engine.paths.compile_cache import GRAPH_REASON
from backend.engine.paths.engine_args import PATH_NAMES, EnginePath, engine_config
from backend.engine.paths.placement import host_plan_for, plan_for
from backend.engine.session.factory import resolve_model
from backend.engine.speculation.choice import SpeculationChoice, attention_label
from backend.errors import ModelNotFound


def measure_with_progress(source: ModelSource, settings: EngineSettings) -> SpeculationChoice:
    """Run the speculation probe with its engines' logs in a file and its stages on stderr."""
    from backend.engine.probe.probe import PROBE_LOG, measure_speculation

    log_dir = locations.logs_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    with capture_stderr(log_dir / PROBE_LOG) as terminal:

        def say(stage: str) -> None:
            terminal.write(f"gemma-chat: {stage}…\n")
            terminal.flush()

        return asyncio.run(measure_speculation(source, settings, log_dir, say))


def _source(settings: Settings) -> tuple[ModelSource, str | None]:
    """The model to describe, and a note when it is the default model described without its weights."""
    try:
        return resolve_model(settings), None
    except ModelNotFound as error:
        if settings.demo or settings.model != DEFAULT_MODEL:
            raise
        note = (
            f"{error.problem} Below is what each path would run once it is here (`model` then points "
            f"at the download). To get it: {error.fix}"
        )
        return described_default_model(), note


def _print_cpu_classes() -> None:
    from backend.engine.cpu.classes import cpu_class, describe_classes
    from backend.provenance import cpu_flags, hardware

    flags = cpu_flags()
    cpu = hardware().get("cpu", "this CPU")
    print(f"cpu: {cpu} · flags: {' '.join(flags) or 'not known'} · class: {cpu_class(flags).name}")
    print("what the optimized path adds, per CPU class (* = this machine):")
    for line in describe_classes(flags):
        print(line)


def _plan(args: argparse.Namespace, source: ModelSource, settings: Settings) -> MemoryPlan | None:
    """The memory plan: for the GPU described by the flags, else this machine's (None: no GPU)."""
    if args.gpu_memory is None and args.gpu_capability is None:
        return plan_for(source, settings.engine)
    if args.gpu_memory is None:
        raise GpuRefused(
            "--gpu-capability needs --gpu-memory GIB too.", "e.g. --gpu-memory 24 --gpu-capability 8.9"
        )
    capability = parse_capability(args.gpu_capability) if args.gpu_capability else (8, 9)
    return plan_for(source, settings.engine, described_gpu(args.gpu_memory, capability))


def _print_plan(plan: MemoryPlan, source: ModelSource) -> None:
    print("\nGPU memory plan (made before any engine starts):")
    for line in plan.lines():
        print(f"  {line}")
    print(f"  attention: vLLM runs Gemma 4 on {expected_attention(plan.gpu.capability)}")
    _print_attention_candidates(plan, source)
    print(f"  compare (F3): {COMPARE_BY_MODE[plan.mode]}")


def _print_attention_candidates(plan: MemoryPlan, source: ModelSource) -> None:
    """The other attention configs `--measure` and `bench` would try on the card, and why any is left out."""
    candidates = attention_candidates(plan.gpu.capability, ModelAttention.read(source.path))
    if candidates.others:
        names = ", ".join(attention_label(json.dumps(config)) for config in candidates.others)
        print(
            f"    `paths --measure` on the card also measures {names} (kept only faster with the "
            "same tokens); `bench` gives each its rows"
        )
    for config, why in candidates.left_out:
        print(f"    left out: {attention_label(json.dumps(config))} — {why}")


COMPARE_BY_MODE = {
    "side-by-side": "both engines stay up; each path's turn runs on its own engine",
    "swap": "runs the baseline, swaps engines, runs the optimized path; the swap is not timed",
}


def _print_host_plan(source: ModelSource, settings: EngineSettings) -> None:
    """The CPU's host-memory plan for both paths (a refusal is printed, not raised: the rest holds)."""
    try:
        lines = host_plan_for(source, settings).lines()
    except HostRefused as refused:
        lines = [f"host memory: {refused}"]
    for line in lines:
        print(line)


def _row_exact_verdict(source: ModelSource) -> str:
    """What the last start here found of this model's layers (the engine's log says it each start)."""
    from backend.compat.linear.row_exact_record import describe, kept

    verdict = kept(str(source.path))
    if verdict is None:
        return (
            "not checked here yet: the first start checks every layer and proves the one-pass kernel "
            "per shape; a layer without a proof verifies row by row, and this line will name it"
        )
    return describe(verdict)


def run_paths(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    source, note = _source(settings)
    if note and args.measure:
        raise ModelNotFound(f"{DEFAULT_MODEL} is not on this machine: --measure needs its weights.", note)
    print(f"model: {source.name} ({source.path})")
    if note:
        print(f"note: {note}")
    drafter = f"{source.drafter}" if source.drafter else "none"
    print(f"drafter: {drafter}{f' — {source.drafter_note}' if source.drafter_note else ''}")
    described = args.gpu_memory is not None
    plan = _plan(args, source, settings)
    gpu = plan is not None
    if described:
        print("platform: a described CUDA GPU (not this machine's): the arguments below are for it")
    else:
        print(f"platform: {'CUDA GPU' if gpu else 'CPU'} (vLLM's {'CUDA' if gpu else 'CPU'} build)")
    if not gpu:
        _print_cpu_classes()
        _print_host_plan(source, settings.engine)
    if plan is not None:
        _print_plan(plan, source)
    if args.measure:
        if described:
            raise GpuRefused(
                "--measure runs engines here: it cannot measure a described GPU.", "Drop --gpu-memory."
            )
        choice = measure_with_progress(source, settings.engine)
        print(f"speculation: {choice.describe()}")
    for name in PATH_NAMES:
        path = EnginePath.named(name)
        config = engine_config(path, source, settings.engine, 2, plan)
        marker = " (default)" if name == settings.path else ""
        print(f"\n[{name}]{marker} {path.summary}")
        for arg_name, arg in config.args.items():
            print(f"  {arg_name} = {arg.value!r}\n      {arg.reason}")
        for env_name, arg in config.env.items():
            print(f"  env {env_name}={arg.value}\n      {arg.reason}")
        graph = config.engine_kwargs()["additional_config"]
        print(f"  additional_config = {graph!r}\n      {GRAPH_REASON}")
        for config_note in config.notes:
            print(f"  note: {config_note}")
        if switch_rules.ROW_EXACT in config.env:
            print(f"  row-exact linears: {_row_exact_verdict(source)}")
    from backend.config import cache_json

    for notice in cache_json.take_notices():  # a kept file's entry dropped, a named path refused
        print(f"\nnote: {notice}")
    return 0
