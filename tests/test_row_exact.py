"""Row-exact verification's parts, on vLLM's own CPU matmuls (no engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from backend.compat import row_exact_linear
from backend.compat.row_exact_linear import applies, row_variant, solo_segments


def test_solo_segments_cut_decoding_requests_into_rows() -> None:
    order = ["a", "b", "c"]
    scheduled = {"a": 5, "b": 37, "c": 1}
    spec = {"a": [1, 2, 3, 4]}
    # a verifies 4 drafts: 5 one-row pieces; b prefills a 37-token chunk in one piece; c decodes alone
    assert solo_segments(order, scheduled, spec) == [1, 1, 1, 1, 1, 37, 1]


def test_which_steps_are_cut() -> None:
    assert applies("1", {"a": 3}, {"a": [7, 8]})
    assert not applies("1", {"a": 1, "b": 1}, {})  # plain decode: untouched on the shipped path
    assert applies("all", {"a": 1, "b": 1}, {})  # the tests' reference cuts every shared step
    assert not applies("all", {"a": 40}, {})  # a request alone is computed whole: stock vLLM's bits


def _onednn(n: int, k: int) -> Callable[..., Any]:
    from vllm import _custom_ops as ops

    if not ops._supports_onednn:
        pytest.skip("this vLLM build has no oneDNN matmul")
    weight = (torch.randn(n, k, generator=torch.Generator().manual_seed(1)) * 0.05).to(torch.bfloat16)
    handler = ops.create_onednn_mm(weight.t(), 32)
    return lambda x, w, b: ops.onednn_mm(handler, x, b)


def test_the_check_finds_onednn_row_variant_where_native_bf16_blocks_the_inner_dimension() -> None:
    if not torch.cpu._is_avx512_bf16_supported():
        pytest.skip("oneDNN has no native bfloat16 matmul on this CPU (it falls back to PyTorch)")
    empty = torch.empty(0, dtype=torch.bfloat16)
    assert row_variant(_onednn(640, 2048), empty, None, 2048, 5)  # measured: K >= 1536 varies


def test_a_cut_step_gives_each_row_its_one_row_bits() -> None:
    linear = _onednn(640, 2048)
    row_exact_linear._define_op()
    row_exact_linear._state["layers"] = {"model.layers.0.mlp.down_proj": (linear, 640)}
    x = torch.randn(9, 2048, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    empty = torch.empty(0, dtype=torch.bfloat16)

    class Batch:
        req_ids = ["a", "b"]

    class Step:
        num_scheduled_tokens = {"a": 5, "b": 4}
        scheduled_spec_decode_tokens = {"a": [1, 2, 3, 4]}

    row_exact_linear._state["step"] = (type("Runner", (), {"input_batch": Batch()})(), Step())
    row_exact_linear._state["segments"] = None
    try:
        out = torch.ops.gemma_chat.row_exact_linear(x, empty, None, "model.layers.0.mlp.down_proj")
    finally:
        row_exact_linear._state["step"] = None
    for i in range(5):  # a's rows: each as a one-row step computes it
        assert torch.equal(out[i : i + 1], linear(x[i : i + 1], empty, None))
    assert torch.equal(out[5:], linear(x[5:], empty, None))  # b's prefill chunk: as alone


def test_a_graph_naming_a_layer_this_engine_did_not_wrap_fails_loudly() -> None:
    """Layers were once called by their position in the check order: a cached graph compiled when
    the embeddings were checked first multiplied by another layer's weights after that order changed."""
    row_exact_linear._define_op()
    row_exact_linear._state["layers"] = {}
    x = torch.zeros(1, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="did not check as row-variant"):
        torch.ops.gemma_chat.row_exact_linear(x, torch.empty(0), None, "model.layers.3.mlp.down_proj")


def test_compare_names_it_in_words() -> None:
    from backend.chat.compare import PathDifference

    assert PathDifference(f"env {row_exact_linear.ENV}", None, "1").label() == "row-exact verification"
