"""The training loop both demo phases run: time-budgeted, evaluated and checkpointed as it goes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.demo.schedule import Budget, ProgressFn, TrainProgress, optimizer, random_windows, set_lr
from backend.demo.state import RunCounters, restore_state, save_state

if TYPE_CHECKING:
    import numpy as np
    import torch


@dataclass(frozen=True)
class PhaseConfig:
    """One phase's budget and batch shape; ``max_steps`` stops early (tests)."""

    name: str
    budget: Budget
    seed: int
    seq_len: int
    batch_size: int
    eval_every_s: float = 300.0
    checkpoint_every_s: float = 300.0
    max_steps: int | None = None


def run_phase(
    config: PhaseConfig,
    trainable: Any,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    evaluate: Callable[[], float],
    train: np.ndarray,
    state_path: Path,
    progress: ProgressFn | None = None,
) -> RunCounters:
    """Train ``trainable`` on random windows of ``train`` until the budget is spent (resuming if saved)."""
    import torch

    opt = optimizer(trainable.parameters(), config.budget.lr)
    generator = torch.Generator().manual_seed(config.seed)
    run = restore_state(state_path, trainable, opt, generator) if state_path.is_file() else RunCounters()
    started = time.monotonic() - run.elapsed_s
    last_eval = last_save = run.elapsed_s
    trainable.train()
    while run.elapsed_s < config.budget.seconds and (
        config.max_steps is None or run.steps < config.max_steps
    ):
        set_lr(opt, config.budget.lr_at(run.steps, run.elapsed_s))
        batch = random_windows(train, config.batch_size, config.seq_len, generator)
        loss = loss_fn(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        run.steps += 1
        run.tokens += batch.numel()
        value = loss.item()
        run.train_loss = value if run.train_loss != run.train_loss else 0.9 * run.train_loss + 0.1 * value
        run.elapsed_s = time.monotonic() - started
        if run.elapsed_s - last_eval >= config.eval_every_s:
            _evaluate(trainable, evaluate, run)
            last_eval = run.elapsed_s = time.monotonic() - started
        if run.elapsed_s - last_save >= config.checkpoint_every_s:
            save_state(state_path, trainable, opt, generator, run)
            last_save = run.elapsed_s
        if progress:
            progress(_event(config, run))
    if not run.history or run.history[-1]["step"] != run.steps:
        _evaluate(trainable, evaluate, run)
    save_state(state_path, trainable, opt, generator, run)
    if progress:
        progress(_event(config, run))
    trainable.eval()
    return run


def _evaluate(trainable: Any, evaluate: Callable[[], float], run: RunCounters) -> None:
    import torch

    trainable.eval()
    with torch.no_grad():
        run.held_out = evaluate()
    trainable.train()
    run.history.append(
        {
            "step": run.steps,
            "tokens": run.tokens,
            "minutes": round(run.elapsed_s / 60, 2),
            "train_loss": round(run.train_loss, 4),
            "held_out": round(run.held_out, 4),
        }
    )


def _event(config: PhaseConfig, run: RunCounters) -> TrainProgress:
    held = run.held_out if run.held_out == run.held_out else None
    return TrainProgress(
        config.name, run.elapsed_s, config.budget.seconds, run.steps, run.tokens, run.train_loss, held
    )
