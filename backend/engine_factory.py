"""From settings to an unstarted engine: resolve the model, pick the profile, build its config."""

from __future__ import annotations

import time
from pathlib import Path

from backend import paths
from backend.model_source import ModelSource, resolve
from backend.profiles import EngineProfile, engine_config
from backend.settings import Settings
from backend.vllm_engine import VllmEngine


def new_log_path(tag: str) -> Path:
    return paths.logs_dir() / f"engine-{time.strftime('%Y%m%d-%H%M%S')}-{tag}.log"


def resolve_model(settings: Settings) -> ModelSource:
    return resolve(settings.model, demo=settings.demo)


def make_engine(settings: Settings, source: ModelSource, profile: str | None = None) -> VllmEngine:
    chosen = EngineProfile.named(profile or settings.profile)
    config = engine_config(chosen, source, settings.engine)
    return VllmEngine(source, config, log_path=new_log_path(chosen.name))
