"""``gemma-chat bench``: progress bars while it runs, then the table (and ``--json`` / ``--markdown``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from app.commands.flags import settings_from_args
from backend.bench.options import (
    BENCH_LOG,
    WORKLOAD_NAMES,
    BenchOptions,
    default_max_tokens,
    default_requests,
    with_levels,
)
from backend.bench.session import run_bench
from backend.config import locations
from backend.engine.local.log import capture_stderr
from backend.engine.model.source import ModelSource, generated_model
from backend.engine.paths.engine_args import Argument
from backend.engine.session.factory import resolve_model


def bench_source(args: argparse.Namespace) -> tuple[ModelSource, dict[str, Argument]]:
    if args.dummy_weights:
        from backend.bench.dummy import make_dummy_checkpoint

        path = make_dummy_checkpoint(locations.generated_models_dir() / "gemma4-e2b-dummy")
        load = Argument("dummy", "--dummy-weights: the E2B architecture with random weights, nothing read")
        return ModelSource(path=path, drafter=None, name="Gemma 4 E2B architecture (dummy weights)"), {
            "load_format": load
        }
    if args.size:
        return generated_model(args.size, 0), {}
    return resolve_model(settings_from_args(args)), {}


def bench_workloads(args: argparse.Namespace) -> tuple[str, ...]:
    """The workloads asked for; with --dummy-weights on a CPU, none unless asked (the full-size
    workloads take hours on a few cores: the step costs are what such a machine can measure)."""
    from backend.engine.platform import on_gpu

    asked = [w for w in args.workload or () if w != "none"]
    if args.workload:
        return tuple(asked)
    if args.dummy_weights and not on_gpu():
        return ()
    return WORKLOAD_NAMES


def _unwritable(path: Path) -> str:
    """Why a report cannot be written to ``path`` ("" where it can)."""
    if path.is_dir():
        return "is a directory; name a file"
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is not writable"
    return ""


def run_bench_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    for flag, target in (("--json", args.json), ("--markdown", args.markdown)):
        problem = target and _unwritable(Path(target))
        if problem:  # checked before the run: a run of minutes must not end in a file it cannot write
            print(f"gemma-chat bench: {flag} {target}: {problem}", file=sys.stderr)
            return 2
    if args.startup:
        from app.commands.bench_startup import run_startup_bench

        return run_startup_bench(args)
    settings = settings_from_args(args)
    source, extra = bench_source(args)
    if args.measure_speculation:
        from app.commands.paths import measure_with_progress

        print(f"speculation: {measure_with_progress(source, settings.engine).describe()}")
    levels = tuple(args.requests or default_requests())
    options = BenchOptions(
        workloads=with_levels(bench_workloads(args), levels),
        requests=levels[0],
        max_tokens=args.max_tokens or default_max_tokens(),
        repetitions=args.repetitions,
        peer=not args.no_peer,
        dummy_weights=args.dummy_weights,
        step_costs=args.step_costs or args.dummy_weights,
        attention=() if args.no_attention_variants else None,
        ablation=not args.no_ablation,
        extra_args=extra,
    )
    log_dir = locations.logs_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    with capture_stderr(log_dir / BENCH_LOG) as terminal:
        console = Console(file=terminal, stderr=False)
        console.print(f"gemma-chat bench: {source.name} ({source.path})")
        bars = Progress(
            TextColumn("{task.description:<34}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(stage, total=total)
            bars.update(tasks[stage], completed=done, total=total)

        with bars:
            report = asyncio.run(run_bench(source, settings, options, progress, log_dir))
    markdown = report.to_markdown()
    sys.stdout.write("\n" + markdown)
    code = 0
    for flag, target, text in (
        ("--json", args.json, json.dumps(report.to_json(), indent=2) + "\n"),
        ("--markdown", args.markdown, markdown),
    ):
        if not target:
            continue
        try:
            Path(target).write_text(text)
        except OSError as error:  # the table is printed above: nothing measured is lost
            print(f"gemma-chat bench: {flag} {target} could not be written: {error}", file=sys.stderr)
            code = 2
            continue
        if flag == "--json":
            sys.stdout.write(f"\nJSON report: {target}\n")
    return code
