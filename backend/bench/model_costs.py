"""What one generated token costs a Gemma 4 text decoder, read from its HF ``config.json``.

Only the text decoder counts: the vision and audio towers and their embedders run once per
attachment during prefill, never per generated token, so they are left out.

Per decoded token the decoder multiplies the hidden state by every projection weight once:
q/k/v/o (each layer with its own head dim; KV-shared layers have q and o only), the MLP
(twice as wide on KV-shared layers when ``use_double_wide_mlp`` is set), the per-layer-input
gate and projection, the model-wide per-layer-input projection, and the LM head (the tied
token embedding, read in full). That is ``2 * matmul_params`` FLOPs and ``matmul_params *
bytes_per_param`` weight bytes. The embedding lookups (``embed_tokens``, the per-layer table)
read one row per token, which is negligible. Attention over the KV cache grows with the
context and is given separately by ``ModelCosts.attention_flops_per_token``.

The rules mirror transformers' ``Gemma4TextConfig`` and ``Gemma4TextModel`` (5.19): both the
published form (``global_head_dim``) and the saved form (``per_layer_config``) are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}
# transformers' Gemma4TextConfig defaults for the fields a config may leave out.
TEXT_DEFAULTS: dict[str, Any] = {
    "global_head_dim": 512,
    "hidden_size_per_layer_input": 256,
    "vocab_size_per_layer_input": 262_144,
    "num_kv_shared_layers": 0,
    "use_double_wide_mlp": False,
    "attention_k_eq_v": False,
    "num_global_key_value_heads": None,
    "sliding_window": 512,
    "head_dim": 256,
}
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


@dataclass(frozen=True)
class LayerCosts:
    layer_type: str
    head_dim: int
    num_query_heads: int
    kv_shared: bool
    sliding_window: int | None
    matmul_params: int


@dataclass(frozen=True)
class ModelCosts:
    """Per-token costs of a Gemma 4 text decoder (vision and audio towers excluded)."""

    dtype: str
    bytes_per_param: int
    matmul_params: int
    """Weights one decoded token is multiplied by, the LM head included."""
    token_embedding_params: int
    per_layer_embedding_params: int
    total_params: int
    """Every tensor of the text decoder (norms and layer scalars too), a tied LM head counted once."""
    layers: tuple[LayerCosts, ...]

    @property
    def flops_per_token(self) -> int:
        return 2 * self.matmul_params

    @property
    def weight_bytes_per_token(self) -> int:
        return self.matmul_params * self.bytes_per_param

    @property
    def effective_params(self) -> int:
        """Parameters without the per-layer embedding table (Gemma's "effective" size, E2B ~2.3B)."""
        return self.total_params - self.per_layer_embedding_params

    def attention_flops_per_token(self, context_len: int) -> int:
        """FLOPs of q·K and p·V for one token attending to ``context_len`` earlier positions."""
        return sum(
            4 * layer.num_query_heads * layer.head_dim * min(context_len, layer.sliding_window or context_len)
            for layer in self.layers
        )


def model_costs(config: Mapping[str, Any], dtype: str | None = None) -> ModelCosts:
    """Costs from a ``config.json`` dict (``gemma4`` with ``text_config``, or ``gemma4_text``).

    ``dtype`` overrides the checkpoint's ``dtype``/``torch_dtype`` (default bfloat16) for the byte count.
    """
    text = {**TEXT_DEFAULTS, **config.get("text_config", config)}
    missing = [key for key in REQUIRED if key not in text]
    if missing:
        raise ValueError(f"not a Gemma 4 text config: missing {', '.join(missing)}")
    if text.get("enable_moe_block") or text.get("num_experts"):
        raise ValueError("Gemma 4 mixture-of-experts configs are not supported by model_costs")
    dtype = dtype or config_dtype(config)
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")

    hidden, per_layer = text["hidden_size"], text["hidden_size_per_layer_input"] or 0
    num_layers, vocab = text["num_hidden_layers"], text["vocab_size"]
    layers = tuple(_layer_costs(text, index, kind) for index, kind in enumerate(_layer_types(text)))
    lm_head = vocab * hidden
    per_layer_projection = hidden * num_layers * per_layer
    matmul = sum(layer.matmul_params for layer in layers) + per_layer_projection + lm_head
    per_layer_table = text["vocab_size_per_layer_input"] * num_layers * per_layer if per_layer else 0
    norms = sum(_layer_norm_params(text, layer) for layer in layers) + hidden + per_layer
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    total = matmul - (lm_head if tied else 0) + vocab * hidden + per_layer_table + norms
    return ModelCosts(
        dtype=dtype,
        bytes_per_param=DTYPE_BYTES[dtype],
        matmul_params=matmul,
        token_embedding_params=vocab * hidden,
        per_layer_embedding_params=per_layer_table,
        total_params=total,
        layers=layers,
    )


def config_dtype(config: Mapping[str, Any]) -> str:
    text = config.get("text_config", {})
    for source in (config, text):
        for key in ("dtype", "torch_dtype"):
            if isinstance(source.get(key), str):
                return str(source[key])
    return "bfloat16"


def _layer_types(text: Mapping[str, Any]) -> list[str]:
    types = text.get("layer_types")
    if types is None:  # transformers' default: five sliding layers, then one full
        types = [
            "sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(text["num_hidden_layers"])
        ]
    if len(types) != text["num_hidden_layers"]:
        raise ValueError(f"layer_types has {len(types)} entries for {text['num_hidden_layers']} layers")
    return [*types[:-1], "full_attention"]  # transformers forces the last layer to full attention


def _head_shape(text: Mapping[str, Any], index: int, layer_type: str) -> tuple[int, int]:
    """(head_dim, num_key_value_heads) of layer ``index``."""
    head_dim, kv_heads = text["head_dim"], text.get("num_key_value_heads", text["num_attention_heads"])
    overrides = text.get("per_layer_config")
    if overrides is not None:
        layer = overrides.get(str(index), overrides.get(index, {}))  # JSON keys are strings
        return layer.get("head_dim", head_dim), layer.get("num_key_value_heads", kv_heads)
    if layer_type != "full_attention":
        return head_dim, kv_heads
    global_kv = text["num_global_key_value_heads"] if text["attention_k_eq_v"] else None
    return text["global_head_dim"], global_kv or kv_heads


def _layer_costs(text: Mapping[str, Any], index: int, layer_type: str) -> LayerCosts:
    head_dim, kv_heads = _head_shape(text, index, layer_type)
    hidden, heads = text["hidden_size"], text["num_attention_heads"]
    first_shared = text["num_hidden_layers"] - text["num_kv_shared_layers"]
    kv_shared = index >= first_shared >= 0 and text["num_kv_shared_layers"] > 0
    query_and_out = 2 * hidden * heads * head_dim
    kv_projections = 0 if kv_shared else hidden * kv_heads * head_dim
    if not kv_shared and not (text["attention_k_eq_v"] and layer_type == "full_attention"):
        kv_projections *= 2  # k_proj and v_proj; k_eq_v full layers have k_proj only
    double_mlp = text["use_double_wide_mlp"] and index >= first_shared > 0
    mlp = 3 * hidden * text["intermediate_size"] * (2 if double_mlp else 1)
    per_layer_input = 2 * hidden * (text["hidden_size_per_layer_input"] or 0)
    window = text["sliding_window"] if layer_type == "sliding_attention" else None
    return LayerCosts(
        layer_type=layer_type,
        head_dim=head_dim,
        num_query_heads=heads,
        kv_shared=kv_shared,
        sliding_window=window,
        matmul_params=query_and_out + kv_projections + mlp + per_layer_input,
    )


def _layer_norm_params(text: Mapping[str, Any], layer: LayerCosts) -> int:
    """Four RMSNorms of width hidden, q_norm (+ k_norm), the per-layer-input norm, the layer scalar."""
    hidden = text["hidden_size"]
    per_layer_norm = hidden if text["hidden_size_per_layer_input"] else 0
    return 4 * hidden + layer.head_dim * (1 if layer.kv_shared else 2) + per_layer_norm + 1
