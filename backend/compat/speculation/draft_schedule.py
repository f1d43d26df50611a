"""The optimized engine's number of drafts per step can be changed while it runs.

vLLM's dynamic speculative decoding (``num_speculative_tokens_per_batch_size``) looks up how many
drafts a step proposes, by the number of running requests, in the scheduler's ``dynamic_sd_lookup``
list, which it builds once at start. Where the engine's environment sets
``GEMMA_CHAT_DRAFT_SCHEDULE=1`` (the optimized path does on a CPU when it may speculate), the engine
core gains a utility method, ``gemma_chat_set_drafts(drafts, up_to, then)``, that rewrites that list: up
to ``up_to`` running requests a step proposes ``drafts`` (at most the configured number), then each
further step ``[up_to, drafts]`` of ``then`` in turn (what ``paths --measure`` measured by load),
above the last none.
The app calls it through vLLM's own utility channel to the engine core (``call_utility_async``),
between requests: the first start measures each number of drafts on the one engine it started, and
every start applies what was decided. Drafts never decide a token (verification keeps the target's),
so no setting of the list can change a reply. Standard library only until vLLM's module is imported.

The method is added whenever the module loads, and the variable is read when it is called, in the
engine core's own process: on CUDA vLLM forks the engine core from the app's process, which imported
``vllm.v1.engine.core`` (``backend.engine.env.import_engine``) before the engine's variables were
set — a check at import time left the forked core without the method ("'EngineCoreProc' object has
no attribute 'gemma_chat_set_drafts'"). An engine whose environment does not set it (the baseline)
refuses the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backend.compat.after_import import after_import
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.v1.engine.core"
ENV = switch_rules.DRAFT_SCHEDULE
METHOD = "gemma_chat_set_drafts"
_PATCHED = "_gemma_chat_draft_schedule"


def rewrite(
    lookup: list[int], configured: int, drafts: int, up_to: int, then: Sequence[Sequence[int]] = ()
) -> list[int]:
    """``lookup`` (index: running requests) rewritten in place: ``drafts`` up to ``up_to``
    requests, then each ``(up_to, drafts)`` of ``then`` (every count at most ``configured``), 0
    above the last; the entries from 1 returned."""
    steps = [(int(up_to), int(drafts)), *((int(u), int(d)) for u, d in then)]
    for batch in range(1, len(lookup)):
        count = next((d for u, d in steps if batch <= u), 0)
        lookup[batch] = max(0, min(count, configured))
    return lookup[1:]


def patch(module: Any) -> None:
    if getattr(module, _PATCHED, False):
        return

    def gemma_chat_set_drafts(
        self: Any, drafts: int, up_to: int, then: Sequence[Sequence[int]] = ()
    ) -> list[int]:
        if not on(ENV):
            raise RuntimeError(
                f"this engine was started without {ENV}=1: its drafts are not set while it runs"
            )
        scheduler = self.scheduler
        lookup = getattr(scheduler, "dynamic_sd_lookup", None)
        if lookup is None:
            raise RuntimeError("this engine has no speculation schedule to change")
        return rewrite(lookup, int(scheduler.num_spec_tokens), drafts, up_to, then)

    setattr(module.EngineCore, METHOD, gemma_chat_set_drafts)
    setattr(module, _PATCHED, True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
