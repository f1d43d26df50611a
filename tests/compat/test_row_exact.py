"""Row-exact verification's parts, on vLLM's own CPU matmuls (no engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from backend.compat.linear import row_exact_linear
from backend.compat.linear.row_exact_linear import applies, row_variant, solo_segments


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


def _kernel() -> Any:
    from backend.kernels import row_exact_bf16

    reason = row_exact_bf16.usable_here()
    if reason is not None:
        pytest.skip(f"the one-pass kernel does not run here: {reason}")
    path, why = row_exact_bf16.for_engine()
    if path is None:
        pytest.skip(f"the one-pass kernel was not built: {why}")
    assert row_exact_bf16.load(path)
    return row_exact_bf16


@pytest.mark.parametrize(("n", "k"), [(640, 2048), (1000, 1536), (96, 256)])
def test_the_kernel_is_proven_against_onednn_one_row_and_several_row_calls(n: int, k: int) -> None:
    """The proof finds the block that gives every row of 1..9 its one-row bits (oneDNN's one-row
    call on AVX512-BF16 sums K in blocks of 512) and the block that gives calls of 2..64 rows the
    bits of oneDNN's own call of as many rows (1,024), also with ragged columns and a short K."""
    if not torch.cpu._is_avx512_bf16_supported():
        pytest.skip("oneDNN has no native bfloat16 matmul on this CPU")
    kernel = _kernel()
    weight = (torch.randn(n, k, generator=torch.Generator().manual_seed(1)) * 0.05).to(torch.bfloat16)
    linear = _onednn(n, k)
    packed = kernel.pack(weight)
    proof = kernel.prove_layer(lambda rows: linear(rows, weight, None), packed, k, n, torch.bfloat16)
    assert proof.one_row is not None and proof.many_rows is not None
    x = torch.randn(13, k, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    together = kernel.rows(x, packed, n, proof.one_row)
    for i in range(13):  # 13 rows: two groups of 6 and a tail, each row its one-row bits
        assert torch.equal(together[i : i + 1], linear(x[i : i + 1], weight, None))
    batch = torch.randn(40, k, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    assert torch.equal(kernel.rows(batch, packed, n, proof.many_rows), linear(batch, weight, None))


def test_the_proof_refuses_a_kernel_that_does_not_reproduce_the_layer() -> None:
    """A matmul summed in another order (double precision, one rounding at the end) has no block
    that reproduces it: the layer keeps its own matmul and its verified rows go one at a time."""
    kernel = _kernel()
    n, k = 256, 2048
    weight = (torch.randn(n, k, generator=torch.Generator().manual_seed(3)) * 0.05).to(torch.bfloat16)

    def float64_order(rows: torch.Tensor) -> torch.Tensor:
        return (rows.double() @ weight.double().t()).to(torch.bfloat16)

    proof = kernel.prove_layer(float64_order, kernel.pack(weight), k, n, torch.bfloat16)
    assert proof.one_row is None and proof.many_rows is None


def test_a_cut_step_runs_its_solo_rows_in_one_kernel_call() -> None:
    """With the kernel proven for the whole layer, a step's rows computed alone go through it in
    one call with the one-row block (each its one-row bits), and a prefilling chunk with the
    several-row block (the bits of the layer's own call of that chunk); a plain step's one row
    and an uncut batch too."""
    if not torch.cpu._is_avx512_bf16_supported():
        pytest.skip("oneDNN has no native bfloat16 matmul on this CPU")
    kernel = _kernel()
    n, k = 640, 2048
    weight = (torch.randn(n, k, generator=torch.Generator().manual_seed(1)) * 0.05).to(torch.bfloat16)
    linear = _onednn(n, k)
    name = "model.layers.0.mlp.down_proj"
    packed = kernel.pack(weight)
    proof = kernel.prove_layer(lambda rows: linear(rows, weight, None), packed, k, n, torch.bfloat16)
    calls: list[tuple[int, int]] = []
    real_rows = kernel.rows

    def counted(x: torch.Tensor, p: torch.Tensor, outputs: int, kb: int) -> torch.Tensor:
        calls.append((x.shape[0], kb))
        return real_rows(x, p, outputs, kb)

    row_exact_linear._define_op()
    saved = dict(row_exact_linear._state)
    row_exact_linear._state.update(
        layers={name: (None, n)},
        fast={name: (packed, proof.one_row, proof.many_rows)},
        kernel=kernel,
        segments=None,
    )

    class Batch:
        req_ids = ["a", "c", "b"]

    class Step:
        num_scheduled_tokens = {"a": 4, "c": 3, "b": 6}
        scheduled_spec_decode_tokens = {"a": [1, 2, 3], "c": [4, 5]}

    x = torch.randn(13, k, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    empty = torch.empty(0, dtype=torch.bfloat16)
    op = torch.ops.gemma_chat.row_exact_linear
    try:
        kernel.rows = counted
        row_exact_linear._state["step"] = (type("Runner", (), {"input_batch": Batch()})(), Step())
        out = op(x, empty, None, name)
        row_exact_linear._state["step"] = None
        plain, batch = op(x[:1], empty, None, name), op(x[:5], empty, None, name)
    finally:
        kernel.rows = real_rows
        row_exact_linear._state.clear()
        row_exact_linear._state.update(saved)
    one, many = proof.one_row, proof.many_rows
    assert calls == [(7, one), (6, many), (1, one), (5, many)]  # a's 4 rows and c's 3 in one call
    for i in range(7):
        assert torch.equal(out[i : i + 1], linear(x[i : i + 1], empty, None))
    assert torch.equal(out[7:], linear(x[7:], empty, None))
    assert torch.equal(plain, linear(x[:1], empty, None))
    assert torch.equal(batch, linear(x[:5], empty, None))


def test_a_replicated_layer_whose_weight_vllm_dropped_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's ``ReplicatedLinear`` (E2B's per-layer input gates) declares ``input_size`` only, and
    oneDNN's dispatch leaves it an empty weight: the check reads the inner size from the weight it
    had before the dispatch (an unchecked gate once changed a verifying step's bits at E2B's shape)."""
    if not torch.cpu._is_avx512_bf16_supported():
        pytest.skip("oneDNN has no native bfloat16 matmul on this CPU")
    monkeypatch.setenv(row_exact_linear.ENV, "1")
    weight = (torch.randn(256, 1536, generator=torch.Generator().manual_seed(4)) * 0.05).to(torch.bfloat16)

    class Replicated:
        prefix = "model.layers.0.per_layer_input_gate"
        input_size = 1536
        bias = None

    layer = Replicated()
    layer.cpu_linear = _onednn(256, 1536)  # type: ignore[attr-defined]
    layer.weight = torch.empty(0, dtype=torch.bfloat16)  # type: ignore[attr-defined]
    saved = dict(row_exact_linear._state)
    row_exact_linear._state.update(layers={}, fast={}, variant=0, checked=0, kernel=False)
    try:
        row_exact_linear._wrap(layer, weight)
        assert row_exact_linear._state["checked"] == 1
        assert "model.layers.0.per_layer_input_gate" in row_exact_linear._state["layers"]
    finally:
        row_exact_linear._state.clear()
        row_exact_linear._state.update(saved)
