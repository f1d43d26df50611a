"""Train the demo model's text stack (a ``Gemma4ForCausalLM``): next-token loss on the chat-formatted corpus.

Float32 on the CPU (a CPU without AVX-512 BF16 multiplies bf16 several times slower).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.demo.schedule import ProgressFn, fixed_windows
from backend.demo.state import RunCounters
from backend.demo.training import PhaseConfig, run_phase

if TYPE_CHECKING:
    import numpy as np
    import torch

EVAL_WINDOWS = 48


def text_model(text_config: Any, seed: int) -> Any:
    import torch
    from transformers import Gemma4ForCausalLM

    torch.manual_seed(seed)
    text_config._attn_implementation = "sdpa"
    return Gemma4ForCausalLM(text_config)


def held_out_loss(model: Any, windows: list[torch.Tensor], batch_size: int) -> float:
    """Mean next-token loss in nats/token over ``windows``."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(windows), batch_size):
            batch = torch.stack(windows[start : start + batch_size])
            loss = model(input_ids=batch, labels=batch).loss
            n = batch.numel() - batch.shape[0]
            total, count = total + loss.item() * n, count + n
    return total / max(count, 1)


def train_lm(
    model: Any,
    train: np.ndarray,
    held_out: np.ndarray,
    config: PhaseConfig,
    state_path: Path,
    progress: ProgressFn | None = None,
) -> RunCounters:
    """Train ``model`` for ``config``'s budget; the held-out figure is the loss in nats/token."""
    windows = fixed_windows(held_out, config.seq_len, EVAL_WINDOWS)

    def loss_fn(batch: torch.Tensor) -> torch.Tensor:
        return model(input_ids=batch, labels=batch).loss

    def evaluate() -> float:
        return held_out_loss(model, windows, config.batch_size)

    return run_phase(config, model, loss_fn, evaluate, train, state_path, progress)
