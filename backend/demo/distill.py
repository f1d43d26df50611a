"""Distil a Gemma 4 MTP drafter from the trained text model, the way vLLM's ``Gemma4MTP`` runs it.

vLLM (``v1/spec_decode/llm_base_proposer.py``, ``gemma4.py``) drafts at target position i
from ``[embed(x[i+1]) * sqrt(hidden), h[i]]`` — the target's scaled embedding of the next
token beside its final (normed) hidden state — at rope position i, with Q-only layers
reading the target's KV of positions <= i (its last sliding and last full layer). Later
draft steps keep position i and feed the drafter's own ``post_projection`` output back as
the hidden state. Training does the same for every position of a window at once: two
draft steps, each matched to the target's own next-token distribution (soft cross-entropy),
so the drafter learns to agree with the target's greedy choice, which is what acceptance counts.
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

SECOND_STEP_WEIGHT = 0.5
EVAL_WINDOWS = 24


def drafter_model(drafter_config: Any, seed: int) -> Any:
    import torch
    from transformers import Gemma4AssistantForCausalLM

    torch.manual_seed(seed)
    drafter_config.get_text_config()._attn_implementation = "sdpa"
    return Gemma4AssistantForCausalLM(drafter_config)


def _masks(length: int, window: int) -> dict[str, torch.Tensor]:
    """Query i sees keys j <= i (full) and i - window < j <= i (sliding)."""
    import torch

    i = torch.arange(length).unsqueeze(1)
    j = torch.arange(length).unsqueeze(0)
    causal = j <= i
    return {
        "full_attention": causal[None, None],
        "sliding_attention": (causal & (j > i - window))[None, None],
    }


def _softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    import torch

    return logits if not cap else torch.tanh(logits / cap) * cap


TargetOut = tuple["torch.Tensor", "torch.Tensor", dict[str, Any]]
"""The target's final hidden states, logits and shared KV for one batch."""


def target_pass(target: Any, batch: torch.Tensor) -> TargetOut:
    """The target's final hidden states, logits and shared KV for ``batch`` (no gradients)."""
    import torch

    with torch.no_grad():
        out = target.model(input_ids=batch, return_shared_kv_states=True, use_cache=False)
        hidden = out.last_hidden_state
        logits = _softcap(target.lm_head(hidden), target.config.final_logit_softcapping)
    return hidden, logits, dict(out.shared_kv_states)


def draft_steps(
    target: Any, drafter: Any, batch: torch.Tensor, target_out: TargetOut, steps: int = 2
) -> list[torch.Tensor]:
    """The drafter's logits for each draft step at every position (position i predicts x[i+1+step])."""
    import torch

    hidden, _, shared_kv = target_out
    length = batch.shape[1] - steps
    positions = torch.arange(length).unsqueeze(0).expand(batch.shape[0], -1)
    window = drafter.config.get_text_config().sliding_window
    masks = _masks(length, window)
    kv = {kind: (k[:, :, :length], v[:, :, :length]) for kind, (k, v) in shared_kv.items()}
    state = hidden[:, :length]
    cap = drafter.config.get_text_config().final_logit_softcapping
    outputs = []
    for step in range(steps):
        with torch.no_grad():
            embedded = target.model.embed_tokens(batch[:, 1 + step : 1 + step + length])
        inner = drafter.model(
            inputs_embeds=drafter.pre_projection(torch.cat([embedded, state], dim=-1)),
            attention_mask=masks,
            position_ids=positions,
            shared_kv_states=kv,
            use_cache=False,
        ).last_hidden_state
        outputs.append(_softcap(drafter.lm_head(inner), cap))
        state = drafter.post_projection(inner)
    return outputs


def distill_loss(target: Any, drafter: Any, batch: torch.Tensor) -> torch.Tensor:
    """Soft cross-entropy of each draft step against the target's distribution at that position."""
    import torch

    target_out = target_pass(target, batch)
    target_logits = target_out[1]
    drafts = draft_steps(target, drafter, batch, target_out)
    length = drafts[0].shape[1]
    loss = torch.zeros(())
    for step, logits in enumerate(drafts):
        teacher = torch.softmax(target_logits[:, 1 + step : 1 + step + length].float(), dim=-1)
        step_loss = -(teacher * torch.log_softmax(logits.float(), dim=-1)).sum(-1).mean()
        loss = loss + step_loss * (1.0 if step == 0 else SECOND_STEP_WEIGHT)
    return loss


def agreement(target: Any, drafter: Any, windows: list[torch.Tensor], batch_size: int) -> float:
    """How often the first draft token equals the target's greedy next token (held-out windows)."""
    import torch

    hits, total = 0, 0
    with torch.no_grad():
        for start in range(0, len(windows), batch_size):
            batch = torch.stack(windows[start : start + batch_size])
            target_out = target_pass(target, batch)
            target_logits = target_out[1]
            first = draft_steps(target, drafter, batch, target_out, steps=1)[0]
            greedy = target_logits[:, 1 : 1 + first.shape[1]].argmax(-1)
            hits += int((first.argmax(-1) == greedy).sum())
            total += greedy.numel()
    return hits / max(total, 1)


def distill_drafter(
    target: Any,
    drafter: Any,
    train: np.ndarray,
    held_out: np.ndarray,
    config: PhaseConfig,
    state_path: Path,
    progress: ProgressFn | None = None,
) -> RunCounters:
    """Train ``drafter`` against the frozen ``target``; the held-out figure is top-1 agreement."""
    target.eval()
    for parameter in target.parameters():
        parameter.requires_grad_(False)
    windows = fixed_windows(held_out, config.seq_len, EVAL_WINDOWS)
    return run_phase(
        config,
        drafter,
        lambda batch: distill_loss(target, drafter, batch),
        lambda: agreement(target, drafter, windows, config.batch_size),
        train,
        state_path,
        progress,
    )
