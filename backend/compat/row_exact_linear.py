"""A verifying step's linear layers give each row the bits a one-row step gives it.

Greedy speculation keeps the baseline's tokens only if the target's logits for each verified row
are the bits a plain decode step (one row) computes. vLLM's CPU build multiplies each linear layer
through the kernel it chose when the weights were loaded (oneDNN, or vLLM's AMX kernels, or
PyTorch); some of those reduce over the inputs in an order that depends on how many rows the call
has: measured on an AVX512-BF16 EPYC, oneDNN's bfloat16 matmul for 2-32 rows differs from one row
alone in about 1 output in 4,000 once the inner dimension is 1,536 or more (K-blocking), and on real
weights that flipped a greedy token within 10 tokens. A verifying step runs 1 + k rows.

Where the engine's environment sets ``GEMMA_CHAT_ROW_EXACT=1`` (the optimized path does whenever it
speculates), each linear layer's matmul — whatever vLLM chose for it — is checked when the weights
are loaded: its rows for 2..``GEMMA_CHAT_ROW_EXACT_ROWS`` rows at once against the same rows one
at a time, on random inputs (at least 2^17 outputs per row count). A layer that differs anywhere
is *row-variant*. While the target model computes a step in which every request is decoding and
some verify drafts (``execute_model``; the drafter's own passes are not affected), a row-variant
layer computes each row by itself — the very call a one-row step makes, so the same bits by
construction — and every other layer computes the rows together, as its check showed they give
the same bits. Prefill, plain decode and mixed steps are untouched. Standard library only until
vLLM's modules are imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log, log_once
from backend.config.switch_rules import ROW_EXACT_MODES, row_exact_mode, row_exact_rows

ENV = "GEMMA_CHAT_ROW_EXACT"
ROWS_ENV = "GEMMA_CHAT_ROW_EXACT_ROWS"
FORCE_ENV = "GEMMA_CHAT_FORCE_ROW_EXACT"
"""``off`` in the app's environment: the optimized path verifies without it (diagnosis only)."""
DEFAULT_ROWS = 9
"""Row counts checked: 2..9 covers one request verifying up to 8 drafts."""
OUTPUTS_PER_CHECK = 1 << 17
"""Outputs compared per row count: a layer whose reduction order depends on the row count differs
in about 1 output in 4,000 (measured), so 2^17 outputs miss it with probability below e^-30."""
LINEAR_MODULE = "vllm.model_executor.layers.utils"
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
_PATCHED = "_gemma_chat_row_exact"
_state: dict[str, Any] = {
    "step": None,
    "segments": None,
    "layers": {},
    "variant": 0,
    "checked": 0,
    "steps": 0,
}
MODES = ROW_EXACT_MODES
_verdicts: dict[tuple[Any, ...], bool] = {}
"""Row-variance by (matmul code, outputs, inputs, dtype, bias): layers of one shape share a check."""


def solo_segments(
    order: Sequence[str], scheduled: Mapping[str, int], spec_tokens: Mapping[str, Sequence[int]]
) -> list[int]:
    """The step's rows cut as each request would compute them alone: a decoding request's rows (its
    new token and its drafts) one at a time, as plain one-row steps would; a prefilling request's
    chunk in one piece, as a step of its own would."""
    sizes: list[int] = []
    for req in order:
        n = scheduled.get(req, 0)
        if n and n == 1 + len(spec_tokens.get(req, ())):
            sizes.extend([1] * n)
        elif n:
            sizes.append(n)
    return sizes


def applies(mode: str, scheduled: Mapping[str, int], spec_tokens: Mapping[str, Sequence[int]]) -> bool:
    """Whether a step is cut: with ``1``, a step where some request verifies drafts; with ``all``
    (a batch-invariant reference), any step of more than one request or row to verify."""
    if mode == "all":
        return len(scheduled) > 1 or any(spec_tokens.values())
    return any(spec_tokens.values())


def max_rows() -> int:
    return row_exact_rows(DEFAULT_ROWS)


def row_variant(linear: Callable[..., Any], weight: Any, bias: Any, k: int, rows: int) -> bool:
    """Whether ``linear`` gives any row other bits with 2..``rows`` rows than with that row alone."""
    import torch

    generator = torch.Generator().manual_seed(0)
    for m in range(2, rows + 1):
        done = 0
        while done < OUTPUTS_PER_CHECK:
            x = torch.randn(m, k, generator=generator).to(weight.dtype)
            together = linear(x, weight, bias)
            for i in range(m):
                if not torch.equal(together[i : i + 1], linear(x[i : i + 1], weight, bias)):
                    return True
            done += m * int(together.shape[-1])
    return False


def _wrap(layer: Any) -> None:
    import torch

    original = getattr(layer, "cpu_linear", None)
    weight = layer.weight
    if original is None or weight.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return
    bias = getattr(layer, "bias", None)
    k = (
        weight.shape[1]
        if weight.ndim == 2 and weight.numel()
        else getattr(layer, "input_size_per_partition", 0)
    )
    if not k:
        return
    _state["checked"] += 1
    n_out = int(original(torch.zeros(1, k, dtype=weight.dtype), weight, bias).shape[-1])
    code = getattr(original, "__code__", None)
    key = (code if code is not None else type(original), n_out, k, weight.dtype, bias is None)
    if key not in _verdicts:  # the order of a reduction is the matmul's and the shape's, not the weights'
        _verdicts[key] = row_variant(original, weight, bias, k, max_rows())
    if not _verdicts[key]:
        return
    name = layer_name(layer)
    _state["layers"][name] = (original, n_out)
    _state["variant"] += 1

    def cpu_linear(x: Any, weight: Any, bias: Any) -> Any:
        return torch.ops.gemma_chat.row_exact_linear(x, weight, bias, name)

    layer.cpu_linear = cpu_linear


def layer_name(layer: Any) -> str:
    """The name a compiled graph calls a row-variant layer by: its module path in the model (vLLM's
    ``prefix``), made unique in load order (the drafter loads after the target). A name, not a
    position in the order layers happened to be checked in: a graph from the compile cache that
    names a layer this engine did not wrap fails loudly (and is compiled afresh) instead of
    multiplying by another layer's weights."""
    base = str(getattr(layer, "prefix", "") or type(layer).__name__)
    name, n = base, 1
    while name in _state["layers"]:
        n += 1
        name = f"{base}#{n}"
    return name


def _layer(name: str) -> tuple[Any, int]:
    found = _state["layers"].get(name)
    if found is None:
        raise RuntimeError(
            f"gemma-chat row-exact verification: the compiled graph names layer {name!r}, which this "
            "engine did not check as row-variant (a compiled graph from another configuration)"
        )
    return found


def _define_op() -> None:
    import torch

    if hasattr(torch.ops.gemma_chat, "row_exact_linear"):
        return

    schema = "(Tensor x, Tensor weight, Tensor? bias, str layer) -> Tensor"

    @torch.library.custom_op("gemma_chat::row_exact_linear", mutates_args=(), schema=schema)
    def row_exact_linear(
        x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: str
    ) -> torch.Tensor:
        linear = _layer(layer)[0]
        rows = x.reshape(-1, x.shape[-1])
        sizes = _segments()
        if not sizes or rows.shape[0] < 2 or sum(sizes) > rows.shape[0]:  # not this step's rows
            return linear(x, weight, bias)
        pieces, start = [], 0
        for size in sizes:
            pieces.append(linear(rows[start : start + size], weight, bias))
            start += size
        if start < rows.shape[0]:  # padding rows
            pieces.append(linear(rows[start:], weight, bias))
        out = torch.cat(pieces)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @row_exact_linear.register_fake
    def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: str) -> torch.Tensor:
        return x.new_empty((*x.shape[:-1], _layer(layer)[1]))


def _segments() -> list[int] | None:
    """This step's cut (None where the step is computed whole), worked out at its first layer."""
    if _state["step"] is None:
        return None
    if _state["segments"] is None:
        runner, step = _state["step"]
        _state["segments"] = solo_segments(
            runner.input_batch.req_ids, step.num_scheduled_tokens, step.scheduled_spec_decode_tokens
        )
    return _state["segments"]


def patch_linear(module: Any) -> None:
    if not row_exact_mode() or getattr(module, _PATCHED, False):
        return
    _define_op()
    original = module.dispatch_cpu_unquantized_gemm

    def dispatch_cpu_unquantized_gemm(layer: Any, remove_weight: bool) -> None:
        original(layer, remove_weight)
        _wrap(layer)

    module.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    setattr(module, _PATCHED, True)


def patch_runner(module: Any) -> None:
    mode = row_exact_mode()
    if not mode or getattr(module, _PATCHED, False):
        return
    runner_class = module.GPUModelRunner
    original = runner_class.execute_model

    def execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        step = scheduler_output
        cut = applies(mode, step.num_scheduled_tokens, step.scheduled_spec_decode_tokens)
        if cut and _state["steps"] == 0:
            _state["steps"] = 1
            log(
                f"gemma-chat row-exact verification: in use ({_state['variant']} of {_state['checked']} "
                "linear layers compute each request's rows as it would alone)"
            )
        _state["step"] = (self, step) if cut else None
        _state["segments"] = None
        try:
            return original(self, scheduler_output, *args, **kwargs)
        finally:
            _state["step"] = None
            _state["segments"] = None

    execute_model.__wrapped__ = original  # type: ignore[attr-defined]
    runner_class.execute_model = execute_model
    setattr(module, _PATCHED, True)
    log_once("gemma-chat row-exact verification: installed")


def variant_layers() -> tuple[int, int]:
    """(row-variant layers, layers checked) in this process (for tests and logs)."""
    return int(_state["variant"]), int(_state["checked"])


def install_import_hook() -> None:
    after_import(LINEAR_MODULE, patch_linear)
    after_import(RUNNER_MODULE, patch_runner)
