"""vLLM's CPU build packs an embedding table for a matmul only when one is asked of it.

The problem: on a CPU, vLLM's ``UnquantizedEmbeddingMethod.process_weights_after_loading`` hands
every vocabulary embedding to ``dispatch_cpu_unquantized_gemm`` (keeping the weight), which builds
oneDNN's packed copy of the whole table — in case the table is used as an LM head. Gemma 4's
per-layer input table (``embed_tokens_per_layer``: 262,144 x 8,960 for E2B, 4.7 GB in bfloat16) is
only ever looked up, never multiplied: its packed copy is 4.7 GB held for nothing, half again the
model's weights (measured: an E2B-shaped engine held 17.5 GB for 8.7 GB of weights).

The fix: the embedding's ``cpu_linear`` is chosen on its first call — the very dispatch vLLM would
have run at load, with whatever wraps it (``row_exact_linear``) — and a table that is only looked up
is never packed. A table that is multiplied (the tied LM head) and holds ``PLAIN_BYTES`` or more is
multiplied from the table itself (PyTorch's ``linear``, oneDNN underneath) instead of a packed copy:
E2B's 262,144 x 1,536 head is 0.75 GiB less per engine, for a logits matmul measured 9% slower (38
vs 42 ms for one row on a 2-core AVX512-BF16 EPYC: about 1% of a 330 ms step); smaller tables pack
as vLLM does, at their first use. Both paths get it (a memory fix, like ``gemma4_audio``: the same
kernels on both, so compare's parity and ratio hold); ``GEMMA_CHAT_EAGER_EMBEDDING_PACK=1``
restores vLLM's own behaviour (to measure what it saves).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.model_executor.layers.vocab_parallel_embedding"
LINEAR_MODULE = "vllm.model_executor.layers.utils"
EAGER_ENV = switch_rules.EAGER_EMBEDDING_PACK
PLAIN_BYTES = 512 * 2**20
"""A multiplied table this large is multiplied from itself, not from a packed copy."""
_PATCHED = "_gemma_chat_lazy_pack"
_TABLE = "_gemma_chat_table"
"""Set on an embedding layer while its first use dispatches it (``patch_dispatch`` reads it)."""


class LazyPack:
    """A layer's ``cpu_linear`` until its first call, which runs vLLM's dispatch and then hands over."""

    def __init__(self, layer: Any, dispatch: Any) -> None:
        self.layer = layer
        self.dispatch = dispatch
        self.lock = threading.Lock()

    def __call__(self, x: Any, weight: Any, bias: Any) -> Any:
        with self.lock:
            if self.layer.cpu_linear is self:
                setattr(self.layer, _TABLE, True)
                try:
                    self.dispatch(self.layer)
                finally:
                    setattr(self.layer, _TABLE, False)
        return self.layer.cpu_linear(x, weight, bias)


def packed(layer: Any) -> bool:
    """Whether ``layer``'s table has been packed for a matmul (for tests)."""
    return not isinstance(getattr(layer, "cpu_linear", None), LazyPack)


def _lazy(original: Any) -> Any:
    def process_weights_after_loading(self: Any, layer: Any) -> None:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            original(self, layer)
            return
        layer.cpu_linear = LazyPack(layer, lambda target: original(self, target))

    return process_weights_after_loading


def patch(module: ModuleType) -> None:
    if not on(EAGER_ENV):
        target = "UnquantizedEmbeddingMethod.process_weights_after_loading"
        wrap(module, {target: _lazy}, mark=_PATCHED, label="embedding pack", on_class=True)


def _plain_for_tables(original: Any) -> Any:
    def dispatch_cpu_unquantized_gemm(layer: Any, remove_weight: bool) -> None:
        weight: Any = getattr(layer, "weight", None)
        table = getattr(layer, _TABLE, False) and weight is not None and weight.ndim == 2
        if table and weight.numel() * weight.element_size() >= PLAIN_BYTES:
            import torch

            layer.cpu_linear = torch.nn.functional.linear
            return
        original(layer, remove_weight)

    return dispatch_cpu_unquantized_gemm


def patch_dispatch(module: ModuleType) -> None:
    """vLLM's CPU matmul dispatch gives a large embedding table PyTorch's ``linear`` on the table
    itself (installed before ``row_exact_linear``'s patch, which then checks and wraps that)."""
    if not on(EAGER_ENV):
        wrap(
            module,
            {"dispatch_cpu_unquantized_gemm": _plain_for_tables},
            mark=_PATCHED,
            label="embedding pack",
        )


def install_import_hook() -> None:
    after_import(MODULE, patch)
    after_import(LINEAR_MODULE, patch_dispatch)
