"""What the demo trainers share: batches of token windows, a time-budgeted learning rate, progress events."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import torch


@dataclass(frozen=True)
class TrainProgress:
    """One progress report: which phase, how far through its time budget, the latest losses."""

    phase: str
    elapsed_s: float
    budget_s: float
    step: int
    tokens: int
    loss: float
    held_out: float | None = None
    """The latest held-out figure: loss in nats/token (model) or top-1 agreement (drafter)."""


ProgressFn = Callable[[TrainProgress], None]


@dataclass(frozen=True)
class Budget:
    """A training phase's time budget and learning-rate schedule (warm-up, then cosine to 10%)."""

    seconds: float
    lr: float
    warmup_steps: int = 20
    floor: float = 0.1

    def lr_at(self, step: int, elapsed_s: float) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = min(1.0, elapsed_s / self.seconds) if self.seconds > 0 else 1.0
        return self.lr * (self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def random_windows(stream: np.ndarray, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``batch`` windows of ``length`` tokens at random offsets of ``stream``."""
    import torch

    starts = torch.randint(0, len(stream) - length, (batch,), generator=generator)
    data = torch.from_numpy(stream)
    return torch.stack([data[s : s + length] for s in starts.tolist()]).long()


def fixed_windows(stream: np.ndarray, length: int, count: int) -> list[torch.Tensor]:
    """Up to ``count`` consecutive non-overlapping windows from the start of ``stream`` (for evaluation)."""
    import torch

    usable = min(count, len(stream) // length)
    data = torch.from_numpy(stream[: usable * length]).long()
    return list(data.view(usable, length)) if usable else []


def optimizer(params: Any, lr: float) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only."""
    import torch

    params = [p for p in params if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr
