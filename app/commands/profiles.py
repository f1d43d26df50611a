"""``gemma-chat profiles``: every engine path, every vLLM argument it sets, and why."""

from __future__ import annotations

import argparse
import asyncio

from app.commands.flags import settings_from_args
from backend import paths
from backend.engine.factory import resolve_model
from backend.engine.log import capture_stderr
from backend.engine.model_source import DEFAULT_MODEL, ModelSource, described_default_model
from backend.engine.platform import on_gpu
from backend.engine.profiles import PROFILE_NAMES, EngineProfile, engine_config
from backend.engine.speculation.choice import SpeculationChoice
from backend.errors import ModelNotFound
from backend.settings import EngineSettings, Settings


def measure_with_progress(source: ModelSource, settings: EngineSettings) -> SpeculationChoice:
    """Run the speculation probe with its engines' logs in a file and its stages on stderr."""
    from backend.engine.speculation.probe import PROBE_LOG, measure_speculation

    log_dir = paths.logs_dir()
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
    from backend.engine.cpu_classes import cpu_class, describe_classes
    from backend.provenance import cpu_flags, hardware

    flags = cpu_flags()
    cpu = hardware().get("cpu", "this CPU")
    print(f"cpu: {cpu} · flags: {' '.join(flags) or 'not known'} · class: {cpu_class(flags).name}")
    print("what the optimized path adds, per CPU class (* = this machine):")
    for line in describe_classes(flags):
        print(line)


def run_profiles(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    source, note = _source(settings)
    if note and args.measure:
        raise ModelNotFound(f"{DEFAULT_MODEL} is not on this machine: --measure needs its weights.", note)
    print(f"model: {source.name} ({source.path})")
    if note:
        print(f"note: {note}")
    print(f"drafter: {source.drafter or 'none (the optimized path uses ngram speculation)'}")
    print(f"platform: {'CUDA GPU' if on_gpu() else 'CPU'} (vLLM's {'CUDA' if on_gpu() else 'CPU'} build)")
    if not on_gpu():
        _print_cpu_classes()
    if args.measure:
        choice = measure_with_progress(source, settings.engine)
        print(f"speculation: {choice.describe()}")
    for name in PROFILE_NAMES:
        profile = EngineProfile.named(name)
        config = engine_config(profile, source, settings.engine, engines_sharing_gpu=2)
        marker = " (default)" if name == settings.profile else ""
        print(f"\n[{name}]{marker} {profile.summary}")
        for arg_name, arg in config.args.items():
            print(f"  {arg_name} = {arg.value!r}\n      {arg.reason}")
        for env_name, arg in config.env.items():
            print(f"  env {env_name}={arg.value}\n      {arg.reason}")
        for note in config.notes:
            print(f"  note: {note}")
    return 0
