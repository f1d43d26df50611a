"""``gemma-chat train-demo OUT``: train the demo model and its drafter, with progress bars. ``OUT``
must be new, empty, or a folder train-demo or make-model wrote (``output_folder.claim``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from backend.demo.schedule import TrainProgress

HELD_OUT_LABEL = {"model": "held-out loss", "drafter": "held-out agreement"}


def run_train_demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from backend.checkpoints.output_folder import claim, done_filling, start_filling
    from backend.checkpoints.writer import MANIFEST
    from backend.demo.pipeline import DemoPlan, train_demo

    plan = DemoPlan(
        out=Path(args.out).expanduser(),
        minutes=args.minutes,
        drafter_minutes=args.drafter_minutes,
        seed=args.seed,
    )
    claim(plan.out, (MANIFEST, "work/tokenizer.json"))  # a folder of the user's: refused before any work
    start_filling(plan.out)
    console = Console()
    budgets = f"model {plan.minutes:g} min, drafter {plan.drafter_minutes:g} min"
    console.print(f"gemma-chat train-demo: {plan.out} ({budgets})")
    if (plan.out / "work").is_dir():
        console.print("resuming from the saved state in work/")
    bars = Progress(
        TextColumn("{task.description:<8}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[figures]}"),
        console=console,
    )
    tasks: dict[str, int] = {}

    evaluations: dict[str, float | None] = {}

    def progress(event: TrainProgress) -> None:
        if not console.is_terminal and evaluations.get(event.phase, -1.0) != event.held_out:
            console.print(
                f"{event.phase} {event.elapsed_s / 60:5.1f} min · {_figures(event)}"
            )  # logs: one line per evaluation
        evaluations[event.phase] = event.held_out
        if event.phase not in tasks:
            tasks[event.phase] = bars.add_task(event.phase, total=event.budget_s, figures="")
        bars.update(
            tasks[event.phase], completed=min(event.elapsed_s, event.budget_s), figures=_figures(event)
        )

    with bars:
        manifest = train_demo(plan, progress)
    done_filling(plan.out)
    model, drafter = manifest["model"], manifest["drafter"]
    console.print(
        f"model: {model['steps']} steps, {model['tokens_seen']:,} tokens, "
        f"held-out loss {model['held_out_loss_nats_per_token']:.3f} nats/token"
    )
    console.print(
        f"drafter: {drafter['steps']} steps, "
        f"held-out top-1 agreement {drafter['held_out_top1_agreement']:.1%}"
    )
    console.print(f"wrote {plan.out}/model and {plan.out}/drafter; manifest:")
    console.print(json.dumps({k: v for k, v in manifest.items() if k not in ("model", "drafter")}, indent=2))
    console.print(f'try it: gemma-chat ask --model {plan.out} "def fibonacci(n):"')
    return 0


def _figures(event: TrainProgress) -> str:
    text = f"step {event.step} · {event.tokens:,} tokens · loss {event.loss:.3f}"
    if event.held_out is not None:
        value = f"{event.held_out:.3f}" if event.phase == "model" else f"{event.held_out:.1%}"
        text += f" · {HELD_OUT_LABEL[event.phase]} {value}"
    return text
