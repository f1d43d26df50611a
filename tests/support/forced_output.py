"""A vLLM logits processor that forces a request's output to given token ids (tests only).

Random-weight checkpoints never call tools by themselves; a request whose
``SamplingParams.extra_args["forced_token_ids"]`` is set gets exactly those tokens (one per
step, then the model's own choice). Everything around it — the prompt with tool declarations,
decoding with special tokens, parsing, running tools, the tool-response prompt — is real.
The engine loads it by name (``tests.support.forced_output:ForcedOutput``) in its own process.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

FQCN = "tests.support.forced_output:ForcedOutput"


class ForcedOutput(LogitsProcessor):
    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.rows: dict[int, tuple[list[int], list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            forced = (params.extra_args or {}).get("forced_token_ids") if params is not None else None
            if forced:
                self.rows[index] = (list(forced), output)
            else:
                self.rows.pop(index, None)
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, (forced, output) in self.rows.items():
            position = len(output)
            if position < len(forced):
                logits[index] = float("-inf")
                logits[index, forced[position]] = 0.0
        return logits
