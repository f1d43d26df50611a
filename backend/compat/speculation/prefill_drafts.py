"""The optimized path's first token does not wait for drafts, and no step drafts for nothing.

With speculative decoding, vLLM's model worker runs the drafter at the end of every step before
it answers the engine core (``GPUModelRunner.sample_tokens``, which the CPU runner inherits), so
the step that prefills a prompt also runs the drafter's passes — the first over every prompt
token — before the first token leaves the worker: on the demo model on a CPU, time to first
token was 0.75-0.93x the baseline's with MTP and 3 drafts. Where the engine's environment sets
``GEMMA_CHAT_NO_PREFILL_DRAFTS=1`` (the optimized path does on a CPU when it speculates; the
baseline never does), a step in which every request is prefilling proposes no drafts: the first
token goes out as soon as it is sampled, and the next step is a plain decode step whose own
drafting proceeds as usual (Gemma 4's drafter reads the target's KV cache and that step's hidden
states, so it loses nothing it would have kept). Tokens cannot move: drafts only decide how many
tokens a step may accept, and verification keeps the target's. Steps that also decode keep their
drafts. The same holds for a step that asks for no drafts (vLLM's speculation schedule, on a CPU
above 4 running requests): vLLM still ran the drafter's first pass there — to fill a drafter cache
that Gemma 4's drafter does not have — and its input preparation; with this set such a step
proposes nothing either (2.3 ms of a 13.6 ms step at 8 requests on the demo model).

Model Runner V2 (vLLM's default on a card) drafts through ``Gemma4Speculator.propose``, which runs
the drafter's first pass over every scheduled token before it looks at how many drafts the step
asked for (``target_dependent_ar/speculator.py``: the zero check comes after ``_prefill``). With
the same environment a V2 step that asks for no drafts (the optimized GPU path's drafts by load
above its busy threshold) answers "no drafts" (-1, as vLLM's own zero path writes) without any
drafter work. Gemma 4's drafter writes no KV of its own (it reads the target's), so nothing is lost
for later steps. Dummy and profiling runs (start-up, CUDA graph capture) and data-parallel steps
(their collectives must match across ranks) run as vLLM wrote them. V1 with async scheduling (V1 on
a card; the CPU build schedules synchronously) keeps vLLM's own too: there the next step scatters
the drafts from a tensor (``GPUModelRunner._prepare_input_ids``), which a list of empty drafts
would break. Standard library only until
vLLM's module is imported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.v1.worker.gpu_model_runner"
V2_MODULE = "vllm.v1.worker.gpu.spec_decode.gemma4.speculator"
ENV = switch_rules.NO_PREFILL_DRAFTS
_PATCHED = "_gemma_chat_no_prefill_drafts"
LABEL = "no prefill drafts"
IN_USE = "gemma-chat no prefill drafts: in use (a step of prefills answers without drafting)"
NONE_ASKED = "gemma-chat no prefill drafts: a step asking for no drafts runs no drafter"


def prefills_only(scheduled: Mapping[str, int], spec_tokens: Mapping[str, Sequence[int]]) -> bool:
    """Whether every request in a step is prefilling: it was scheduled more tokens than the one
    a decode step computes plus the drafts it verifies."""
    return bool(scheduled) and all(n > 1 + len(spec_tokens.get(req, ())) for req, n in scheduled.items())


def none_asked(step: Any) -> bool:
    """Whether a step asks the drafter for no drafts (vLLM's speculation schedule set 0)."""
    return getattr(step, "num_spec_tokens_to_schedule", None) == 0


def _no_prefill_drafts(original: Any) -> Any:
    def propose_draft_token_ids(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        step = scheduler_output
        if getattr(self, "use_async_scheduling", False):  # V1 on a card: drafts must stay a tensor
            return original(self, scheduler_output, *args, **kwargs)
        if prefills_only(step.num_scheduled_tokens, step.scheduled_spec_decode_tokens):
            log_once(IN_USE)
            return [[] for _ in self.input_batch.req_ids]
        if none_asked(step):
            log_once(NONE_ASKED)
            return [[] for _ in self.input_batch.req_ids]
        return original(self, scheduler_output, *args, **kwargs)

    return propose_draft_token_ids


def patch(module: Any) -> None:
    if on(ENV):
        wrap(
            module, {"GPUModelRunner.propose_draft_token_ids": _no_prefill_drafts}, mark=_PATCHED, label=LABEL
        )


def skips_v2_drafter(num_speculative_tokens: int | None, kwargs: Mapping[str, Any]) -> bool:
    """Whether a V2 ``propose`` call can answer without the drafter: the step asks for no drafts,
    and it is neither a dummy or profiling run nor a data-parallel step."""
    dummy = kwargs.get("dummy_run") or kwargs.get("is_profile")
    return num_speculative_tokens == 0 and not dummy and kwargs.get("dp_sync_state") is None


def _no_drafter_for_none(original: Any) -> Any:
    def propose(self: Any, input_batch: Any, *args: Any, **kwargs: Any) -> Any:
        if skips_v2_drafter(kwargs.get("num_speculative_tokens"), kwargs):
            log_once(NONE_ASKED)
            drafts = self.draft_tokens[: input_batch.num_reqs]
            drafts.fill_(-1)
            return drafts
        return original(self, input_batch, *args, **kwargs)

    return propose


def patch_v2(module: Any) -> None:
    """Model Runner V2's Gemma 4 drafter: a step asking for no drafts runs none of it."""
    if on(ENV):
        wrap(module, {"Gemma4Speculator.propose": _no_drafter_for_none}, mark=_PATCHED, label=LABEL)


def install_import_hook() -> None:
    after_import(MODULE, patch)
    after_import(V2_MODULE, patch_v2)
