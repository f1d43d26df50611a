"""The optimized path's first drafter pass computes only the rows it samples.

Gemma 4's MTP drafter (``vllm.v1.spec_decode.gemma4.Gemma4Proposer``) keeps no KV cache of its
own: each of its attention layers reads the target's cache (``Gemma4MTPAttention`` computes a query
and passes no key or value), and every draft pass predicts from the same position — the request's
last accepted token. vLLM's proposer still runs its first pass over every row the target verified
(``SpecDecodeBaseProposer.propose``: ``1 + k`` rows a request after a step with ``k`` drafts) and
keeps one row a request (``token_indices_to_sample``); the other rows' outputs are computed and
dropped, and, with no cache to write, they feed nothing. Where the engine's environment sets
``GEMMA_CHAT_SAMPLED_ROW_DRAFTS=1`` (the optimized path does on a CPU when it speculates; the
baseline never does), the first pass gets only those rows: each request's row moved to the front of
the proposer's buffers (token, position, the target's hidden state) and attention metadata for one
query a request at that position — the metadata vLLM's own later passes use (one query a request,
the sequence ending at the sampled position: the verified length less the rejected drafts). The
later passes are unchanged. Drafts never change a token (verification keeps the target's);
this changes which rows a pass computes, not what a kept row sees. Drafters that write a cache of
their own, M-RoPE and parallel drafting keep vLLM's pass. Standard library only until vLLM's
module is imported.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.v1.spec_decode.gemma4"
ENV = switch_rules.SAMPLED_ROW_DRAFTS
_PATCHED = "_gemma_chat_sampled_row_drafts"
_ARMED = "_gemma_chat_sampled_rows"
IN_USE = "gemma-chat sampled-row drafts: in use (the drafter's first pass computes one row a request)"


def applies(proposer: Any) -> bool:
    """Whether a proposer's first pass can drop the rows it does not sample: every draft pass
    predicts from one position and the drafter writes no cache (Gemma 4's MTP drafter)."""
    return bool(
        getattr(proposer, "constant_draft_positions", False)
        and not proposer.needs_extra_input_slots
        and not proposer.uses_mrope
        and not proposer.parallel_drafting
    )


def compact(proposer: Any, rows: Any, attn: Any, rejected: Any) -> tuple[int, Any, Any]:
    """Move each request's sampled row (``rows``) to the front of the proposer's buffers and
    return (row count, their indices, attention metadata for one query a request).

    ``rejected`` (drafts each request's verification rejected, or None) shortens the sequences to
    end at the sampled row, as vLLM's later passes do."""
    import torch

    count = attn.batch_size()
    proposer.input_ids[:count] = proposer.input_ids[rows]
    proposer.positions[:count] = proposer.positions[rows]
    proposer.hidden_states[:count] = proposer.hidden_states[rows]
    one = copy.copy(attn)
    one.query_start_loc = proposer.arange[: count + 1]
    one.query_start_loc_cpu = torch.from_numpy(proposer.token_arange_np[: count + 1]).clone()
    one.num_actual_tokens = count
    one.max_query_len = 1
    one.slot_mapping = attn.slot_mapping[rows]
    if attn.positions is not None:
        one.positions = proposer.positions[:count]
    if rejected is not None:
        if proposer.num_speculative_tokens > 1:
            # vLLM's later passes subtract the rejected drafts from this same tensor in place;
            # ``propose`` is called without them (below), so it is done here, once, as there.
            attn.seq_lens -= rejected
            one.seq_lens = attn.seq_lens
        else:
            one.seq_lens = attn.seq_lens - rejected
    return count, proposer.arange[:count], one


def _sampled_rows(original_propose: Any) -> Any:
    def propose(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args or not applies(self):
            return original_propose(self, *args, **kwargs)
        log_once(IN_USE)
        setattr(self, _ARMED, (kwargs.get("num_rejected_tokens_gpu"),))
        try:
            return original_propose(self, **{**kwargs, "num_rejected_tokens_gpu": None})
        finally:
            setattr(self, _ARMED, None)

    return propose


def _compacted(original_first_pass: Any) -> Any:
    def set_inputs_first_pass(self: Any, *args: Any, **kwargs: Any) -> Any:
        count, rows, attn = original_first_pass(self, *args, **kwargs)
        armed = getattr(self, _ARMED, None)
        if armed is None:
            return count, rows, attn
        return compact(self, rows, attn, armed[0])

    return set_inputs_first_pass


def patch(module: Any) -> None:
    if on(ENV):
        targets = {
            "Gemma4Proposer.propose": _sampled_rows,
            "Gemma4Proposer.set_inputs_first_pass": _compacted,
        }
        wrap(module, targets, mark=_PATCHED, label="sampled-row drafts")


def install_import_hook() -> None:
    after_import(MODULE, patch)
