"""``gemma-chat profiles``: every engine path, every vLLM argument it sets, and why."""

from __future__ import annotations

import argparse

from app.commands.ask import settings_from_args
from backend.engine_factory import resolve_model
from backend.profiles import PROFILE_NAMES, EngineProfile, engine_config, on_gpu


def run_profiles(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    source = resolve_model(settings)
    print(f"model: {source.name} ({source.path})")
    print(f"drafter: {source.drafter or 'none (the optimized path uses ngram speculation)'}")
    print(f"platform: {'CUDA GPU' if on_gpu() else 'CPU'} (vLLM's {'CUDA' if on_gpu() else 'CPU'} build)")
    for name in PROFILE_NAMES:
        profile = EngineProfile.named(name)
        config = engine_config(profile, source, settings.engine, engines_sharing_gpu=2)
        marker = " (default)" if name == settings.profile else ""
        print(f"\n[{name}]{marker} {profile.summary}")
        for arg_name, arg in config.args.items():
            print(f"  {arg_name} = {arg.value!r}\n      {arg.reason}")
        for env_name, arg in config.env.items():
            print(f"  env {env_name}={arg.value}\n      {arg.reason}")
    return 0
