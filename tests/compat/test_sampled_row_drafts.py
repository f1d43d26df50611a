"""The drafter's first pass computes only the rows it samples.

The real engine's side (the patch live in the optimized engine's proposer, tokens identical to the
baseline's with MTP drafting) is checked in tests/bench/test_bench.py.
"""

from __future__ import annotations

import inspect
import itertools
import types
from typing import Any

import numpy as np
import pytest
import torch

from backend.chat.compare import ENV_LABELS
from backend.compat.speculation import sampled_row_drafts
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EnginePath, engine_config


class Attn:
    """The fields of vLLM's ``CommonAttentionMetadata`` the compaction reads or writes."""

    def __init__(self, starts: list[int], seq_lens: list[int], slots: list[int]) -> None:
        self.query_start_loc = torch.tensor(starts, dtype=torch.int32)
        self.query_start_loc_cpu = self.query_start_loc.clone()
        self.seq_lens = torch.tensor(seq_lens, dtype=torch.int32)
        self.slot_mapping = torch.tensor(slots, dtype=torch.int64)
        self.num_actual_tokens = starts[-1]
        self.max_query_len = max(b - a for a, b in itertools.pairwise(starts))
        self.positions: torch.Tensor | None = None

    def batch_size(self) -> int:
        return len(self.seq_lens)


def _proposer(rows: int, drafts: int) -> Any:
    return types.SimpleNamespace(
        constant_draft_positions=True,
        needs_extra_input_slots=False,
        uses_mrope=False,
        parallel_drafting=False,
        num_speculative_tokens=drafts,
        input_ids=torch.arange(100, 100 + rows + 4),
        positions=torch.arange(10, 10 + rows + 4),
        hidden_states=torch.arange(rows + 4, dtype=torch.float32)[:, None].repeat(1, 3),
        arange=torch.arange(64, dtype=torch.int32),
        token_arange_np=np.arange(64, dtype=np.int32),
        device=torch.device("cpu"),
    )


def test_each_request_keeps_its_sampled_row_and_a_sequence_that_ends_there() -> None:
    # Two requests verified 2 drafts each (rows 0-2 and 3-5); the first kept 1 draft (1 rejected,
    # sampled row 1), the second kept both (sampled row 5).
    proposer = _proposer(6, drafts=2)
    attn = Attn([0, 3, 6], seq_lens=[13, 43], slots=[60, 61, 62, 90, 91, 92])
    rows = torch.tensor([1, 5], dtype=torch.int32)
    rejected = torch.tensor([1, 0], dtype=torch.int32)
    count, indices, one = sampled_row_drafts.compact(proposer, rows, attn, rejected)
    assert count == 2
    assert indices.tolist() == [0, 1]
    assert proposer.input_ids[:2].tolist() == [101, 105]
    assert proposer.positions[:2].tolist() == [11, 15]
    assert proposer.hidden_states[:2, 0].tolist() == [1.0, 5.0]
    assert one.query_start_loc.tolist() == [0, 1, 2]
    assert one.query_start_loc_cpu.tolist() == [0, 1, 2]
    assert (one.num_actual_tokens, one.max_query_len) == (2, 1)
    assert one.slot_mapping.tolist() == [61, 92]
    assert one.seq_lens.tolist() == [12, 43], "ends at the sampled position: verified less rejected"
    assert attn.seq_lens.tolist() == [12, 43], "in place, as vLLM's later passes would have done it"
    assert attn.query_start_loc.tolist() == [0, 3, 6], "the step's own metadata keeps its rows"


def test_with_one_draft_the_steps_sequence_lengths_are_left_alone() -> None:
    proposer = _proposer(4, drafts=1)
    attn = Attn([0, 2, 4], seq_lens=[8, 20], slots=[0, 1, 2, 3])
    _, _, one = sampled_row_drafts.compact(proposer, torch.tensor([0, 3]), attn, torch.tensor([1, 0]))
    assert one.seq_lens.tolist() == [7, 20]
    assert attn.seq_lens.tolist() == [8, 20], "vLLM subtracts only when it runs a second pass"
    attn = Attn([0, 2, 4], [8, 20], [0, 1, 2, 3])
    _, _, unpadded = sampled_row_drafts.compact(_proposer(4, 2), torch.tensor([1, 3]), attn, None)
    assert unpadded.seq_lens.tolist() == [8, 20], "rows already end at the last kept token"


def _proposer_module() -> types.ModuleType:
    class Gemma4Proposer:
        def __init__(self) -> None:
            self.__dict__.update(vars(_proposer(6, drafts=2)))
            self.calls: list[Any] = []

        def propose(self, **kwargs: Any) -> Any:
            self.num_speculative_tokens = kwargs["num_speculative_tokens"]
            self.calls.append(kwargs["num_rejected_tokens_gpu"])
            return self.set_inputs_first_pass(cad=kwargs["common_attn_metadata"])

        def set_inputs_first_pass(self, cad: Attn) -> Any:
            return cad.num_actual_tokens, cad.query_start_loc[1:] - 1, cad

    module = types.ModuleType("gemma4")
    module.Gemma4Proposer = Gemma4Proposer  # type: ignore[attr-defined]
    return module


def _kwargs(drafts: int, rejected: Any) -> dict[str, Any]:
    attn = Attn([0, 3, 6], seq_lens=[13, 43], slots=list(range(6)))
    return {
        "num_speculative_tokens": drafts,
        "common_attn_metadata": attn,
        "num_rejected_tokens_gpu": rejected,
    }


def test_the_proposer_runs_its_first_pass_on_the_sampled_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sampled_row_drafts.ENV, "1")
    module = _proposer_module()
    sampled_row_drafts.patch(module)
    proposer = module.Gemma4Proposer()
    count, _, one = proposer.propose(**_kwargs(2, torch.tensor([1, 0])))
    assert count == 2 and one.seq_lens.tolist() == [12, 43]
    assert proposer.calls == [None], "vLLM's own subtraction is left to the compaction, done once"
    assert proposer.set_inputs_first_pass(Attn([0, 3], [5], [0, 1, 2]))[0] == 3, "unarmed outside propose"
    sampled_row_drafts.patch(module)  # idempotent: wrapped once
    assert not hasattr(module.Gemma4Proposer.propose.__wrapped__, "__wrapped__")
    monkeypatch.delenv(sampled_row_drafts.ENV)
    stock = _proposer_module()
    sampled_row_drafts.patch(stock)
    assert stock.Gemma4Proposer().propose(**_kwargs(2, None))[0] == 6


def test_vllm_still_drafts_the_way_the_patch_assumes() -> None:
    """The contract, read from the installed vLLM: Gemma 4's drafter layers read the target's cache
    and write none; its passes share one position; the runner calls ``propose`` with keywords;
    vLLM's later passes take one query a request with the rejected drafts subtracted."""
    from vllm.model_executor.models.gemma4_mtp import Gemma4MTPAttention
    from vllm.v1.spec_decode.gemma4 import Gemma4Proposer
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert "self.attn(q, None, None)" in inspect.getsource(Gemma4MTPAttention.forward)
    assert "self.constant_draft_positions = True" in inspect.getsource(Gemma4Proposer.__init__)
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    for line in (
        "self.set_inputs_first_pass(",
        "common_attn_metadata.max_query_len = 1",
        "self.token_arange_np[: batch_size + 1]",
        "common_attn_metadata.query_start_loc = self.arange[: batch_size + 1]",
        "common_attn_metadata.seq_lens -= num_rejected_tokens_gpu",
        "sample_hidden_states = last_hidden_states[token_indices_to_sample]",
    ):
        assert line in propose, line
    runner = inspect.getsource(GPUModelRunner.propose_draft_token_ids)
    assert "num_rejected_tokens_gpu=num_rejected_tokens_gpu," in runner


def test_the_optimized_path_asks_for_it_only_when_it_speculates(tiny_source: ModelSource) -> None:
    mtp = EngineSettings(speculation="mtp")
    optimized = engine_config(EnginePath.optimized(), tiny_source, mtp)
    assert optimized.env[sampled_row_drafts.ENV].value == 1
    assert "never change a token" in optimized.env[sampled_row_drafts.ENV].reason
    assert ENV_LABELS[f"env {sampled_row_drafts.ENV}"] == "drafter on sampled rows"
    plain = engine_config(EnginePath.optimized(), tiny_source, EngineSettings(speculation="none"))
    assert sampled_row_drafts.ENV not in plain.env
    for path in (EnginePath.baseline(), EnginePath.eager()):
        assert sampled_row_drafts.ENV not in engine_config(path, tiny_source, mtp).env
