"""Resumable training state: a model, its optimizer, the random generator and the run's counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunCounters:
    """What a training phase has done so far (saved with its weights, restored on resume)."""

    steps: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0
    train_loss: float = float("nan")
    held_out: float = float("nan")
    history: list[dict[str, float]] = field(default_factory=list)


def save_state(path: Path, model: Any, opt: Any, generator: Any, counters: RunCounters) -> None:
    """Write the state atomically (a crash mid-write leaves the previous state)."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "generator": generator.get_state(),
        "counters": vars(counters),
    }
    partial = path.with_suffix(".partial")
    torch.save(state, partial)
    partial.replace(path)


def restore_state(path: Path, model: Any, opt: Any, generator: Any) -> RunCounters:
    import torch

    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    return RunCounters(**state["counters"])
