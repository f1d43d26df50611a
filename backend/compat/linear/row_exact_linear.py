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

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log, log_once
from backend.compat.linear import row_exact_record
from backend.config import switch_rules
from backend.config.switch_rules import ROW_EXACT_MODES, row_exact_mode, row_exact_rows

ENV = switch_rules.ROW_EXACT
KERNEL_ENV = switch_rules.ROW_EXACT_KERNEL
"""The compiled one-pass kernel (``backend/kernels/row_exact_bf16``); set by the optimized path
where this CPU has AVX512-BF16 and ``GEMMA_CHAT_FORCE_ROW_EXACT`` does not ask for ``rows``."""
ROWS_ENV = switch_rules.ROW_EXACT_ROWS
FORCE_ENV = switch_rules.FORCE_ROW_EXACT
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
    "fast": {},
    "kernel": None,
}
MODES = ROW_EXACT_MODES
_verdicts: dict[tuple[Any, ...], bool] = {}
"""Row-variance by (matmul code, outputs, inputs, dtype, bias): layers of one shape share a check."""
WHOLE_MIN_WEIGHTS = 1 << 20
"""Smaller layers keep vLLM's matmul for every call but verified rows: through the operator's
Python wrapper (tens of microseconds a call) a plain step of the demo's small layers would slow
down; a layer of a million weights or more (every large layer of E2B) gains on a plain step."""
_proofs: dict[tuple[Any, ...], Any] = {}
"""The one-pass kernel's proofs (``row_exact_bf16.Proof``) by the same key."""


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


def _wrap(layer: Any, loaded_weight: Any) -> None:
    """Check a layer vLLM just dispatched; ``loaded_weight`` is its weight before the dispatch
    (vLLM drops it from most layers once oneDNN has packed its own copy)."""
    import torch

    original = getattr(layer, "cpu_linear", None)
    weight = layer.weight
    if original is None or weight.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return
    bias = getattr(layer, "bias", None)
    k = _inputs(layer, weight, loaded_weight)
    if not k:
        return
    _state["checked"] += 1
    n_out = int(original(torch.zeros(1, k, dtype=weight.dtype), weight, bias).shape[-1])
    code = getattr(original, "__code__", None)
    key = (code if code is not None else type(original), n_out, k, weight.dtype, bias is None)
    if row_exact_mode() and key not in _verdicts:
        # the order of a reduction is the matmul's and the shape's, not the weights'
        _verdicts[key] = row_variant(original, weight, bias, k, max_rows())
    large = n_out * k >= WHOLE_MIN_WEIGHTS
    fast = _one_pass(key, original, loaded_weight, bias, k, n_out) if large or _verdicts.get(key) else None
    whole = large and fast is not None and fast[2] is not None
    if not whole and not _verdicts.get(key):
        return
    name = layer_name(layer)
    _state["layers"][name] = (None if whole else original, n_out)
    if _verdicts.get(key):
        _state["variant"] += 1
    if fast is not None:
        _state["fast"][name] = fast

    def cpu_linear(x: Any, weight: Any, bias: Any) -> Any:
        return torch.ops.gemma_chat.row_exact_linear(x, weight, bias, name)

    layer.cpu_linear = cpu_linear  # a whole layer's oneDNN copy is freed with the old function


def _inputs(layer: Any, weight: Any, loaded_weight: Any) -> int:
    """The layer's inner size: from its weight, or the weight it had before vLLM dropped it, or its
    declared sizes (a ``ReplicatedLinear`` has ``input_size`` only: E2B's per-layer input gates
    went unchecked when only ``input_size_per_partition`` was read, and a verifying step then
    changed their bits)."""
    for tensor in (weight, loaded_weight):
        if tensor is not None and tensor.ndim == 2 and tensor.numel():
            return int(tensor.shape[1])
    return int(getattr(layer, "input_size_per_partition", 0) or getattr(layer, "input_size", 0) or 0)


def _kernel() -> Any:
    """The one-pass kernel's module where this engine loaded it, else None."""
    if _state["kernel"] is None:
        path = os.environ.get(KERNEL_ENV, "")
        _state["kernel"] = False
        if path:
            from pathlib import Path

            from backend.kernels import row_exact_bf16

            if row_exact_bf16.load(Path(path)):
                _state["kernel"] = row_exact_bf16
    return _state["kernel"] or None


def _one_pass(key: tuple[Any, ...], original: Any, weight: Any, bias: Any, k: int, n: int) -> Any:
    """(packed weights, one-row K block, several-row K block or None) where the kernel is proven
    to reproduce the layer's one-row call; else None (the layer keeps its own matmul)."""
    kernel = _kernel()
    if kernel is None or weight is None or not kernel.eligible(weight, bias):
        return None
    if key in _proofs and _proofs[key].one_row is None:  # a shape already refused: nothing to pack
        return None
    packed = kernel.pack(weight)
    if key not in _proofs:
        matmul = functools.partial(original, weight=weight, bias=bias)
        _proofs[key] = kernel.prove_layer(matmul, packed, k, n, weight.dtype)
    proof = _proofs[key]
    return None if proof.one_row is None else (packed, proof.one_row, proof.many_rows)


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
        linear, n = _layer(layer)
        rows = x.reshape(-1, x.shape[-1])
        fast = _state["fast"].get(layer)

        def together(piece: torch.Tensor) -> torch.Tensor:  # rows as the layer's own call computes them
            if linear is not None:
                return linear(piece, weight, bias)
            block = fast[1] if piece.shape[0] == 1 else fast[2]
            return _kernel().rows(piece, fast[0], n, block)

        sizes = _segments()
        if not sizes or rows.shape[0] < 2 or sum(sizes) > rows.shape[0]:  # not this step's rows
            return together(x)
        pieces, start = [], 0
        for solo, size in _runs(sizes):
            piece = rows[start : start + size]
            if solo and fast is not None:  # rows computed alone: all of them in one pass
                pieces.append(_kernel().rows(piece, fast[0], n, fast[1]))
            elif solo:
                pieces.extend(together(piece[i : i + 1]) for i in range(size))
            else:  # a prefilling request's chunk, computed as a step of its own would
                pieces.append(together(piece))
            start += size
        if start < rows.shape[0]:  # padding rows
            pieces.append(together(rows[start:]))
        out = torch.cat(pieces)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @row_exact_linear.register_fake
    def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: str) -> torch.Tensor:
        return x.new_empty((*x.shape[:-1], _layer(layer)[1]))


def _runs(sizes: Sequence[int]) -> list[tuple[bool, int]]:
    """The step's cut as runs: (True, n) for n consecutive rows each computed alone, (False, n)
    for one chunk of n rows computed together."""
    runs: list[tuple[bool, int]] = []
    for size in sizes:
        if size == 1 and runs and runs[-1][0]:
            runs[-1] = (True, runs[-1][1] + 1)
        else:
            runs.append((size == 1, size))
    return runs


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
    wanted = bool(row_exact_mode()) or bool(os.environ.get(KERNEL_ENV))
    if not wanted or getattr(module, _PATCHED, False):
        return
    _define_op()
    original = module.dispatch_cpu_unquantized_gemm

    def dispatch_cpu_unquantized_gemm(layer: Any, remove_weight: bool) -> None:
        loaded_weight = getattr(layer, "weight", None)
        original(layer, remove_weight)
        _wrap(layer, loaded_weight)

    module.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    setattr(module, _PATCHED, True)


def patch_runner(module: Any) -> None:
    mode = row_exact_mode()
    if (not mode and not os.environ.get(KERNEL_ENV)) or getattr(module, _PATCHED, False):
        return
    runner_class = module.GPUModelRunner
    original = runner_class.execute_model

    def execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        step = scheduler_output
        cut = bool(mode) and applies(mode, step.num_scheduled_tokens, step.scheduled_spec_decode_tokens)
        if (cut or not mode) and _state["steps"] == 0:
            _state["steps"] = 1
            log(f"gemma-chat row-exact linears: in use ({summary()})")
            _keep_verdict(self)
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


def verdict() -> dict[str, Any]:
    """What the load-time checks found, as kept for ``gemma-chat paths`` (``row_exact_record``)."""
    whole = [name for name, (linear, _n) in _state["layers"].items() if linear is None]
    slow = [name for name in _state["layers"] if name not in _state["fast"]] if _state["kernel"] else []
    return {
        "variant": _state["variant"],
        "checked": _state["checked"],
        "kernel": bool(_state["kernel"]),
        "whole": len(whole),
        "rows_only": len([name for name in _state["fast"] if name not in whole]),
        "unproven": slow[: row_exact_record.NAMES_KEPT],
        "unproven_count": len(slow),
    }


def _keep_verdict(runner: Any) -> None:
    """The verdict, kept for ``gemma-chat paths``; a cache that cannot be written costs only the record."""
    try:
        row_exact_record.keep(str(runner.model_config.model), verdict())
    except (OSError, AttributeError, ValueError) as error:
        log(f"gemma-chat row-exact linears: the verdict was not kept for gemma-chat paths ({error})")


def summary() -> str:
    """What row-exact verification and the one-pass kernel do with this engine's layers, in words."""
    variant, checked = _state["variant"], _state["checked"]
    text = f"{variant} of {checked} linear layers row-variant"
    if _state["kernel"]:
        whole = [name for name, (linear, _n) in _state["layers"].items() if linear is None]
        rows_only = [name for name in _state["fast"] if name not in whole]
        slow = [name for name in _state["layers"] if name not in _state["fast"]]
        text += (
            f"; the one-pass kernel (AVX512-BF16, proven at load) computes {len(whole)} layers whole "
            f"and the verified rows of {len(rows_only)} more"
        )
        if slow:
            text += f"; {len(slow)} row by row (no proof): {', '.join(slow[:8])}"
            text += " ..." if len(slow) > 8 else ""
    elif variant:
        text += ", their verified rows computed one at a time"
    return text


def install_import_hook() -> None:
    after_import(LINEAR_MODULE, patch_linear)
    after_import(RUNNER_MODULE, patch_runner)
