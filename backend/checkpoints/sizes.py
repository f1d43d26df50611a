"""The shapes of generated Gemma 4 checkpoints: a few-MB test fixture and a benchmark size.

Both keep what makes Gemma 4 E2B Gemma 4 (see ``assets/gemma4_e2b_config.json`` for
the real values): interleaved sliding and full attention layers with different head
dims (vLLM's CPU attention supports 32, 64, ..., 256, 512), the last layers reusing
earlier layers' KV, per-layer input embeddings, a double-wide MLP on KV-sharing layers,
the final logit soft-cap, and vision and audio towers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar


@dataclass(frozen=True)
class TextShape:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    global_head_dim: int
    num_kv_shared_layers: int
    hidden_size_per_layer_input: int
    sliding_window: int
    max_position_embeddings: int


@dataclass(frozen=True)
class VisionShape:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    head_dim: int


@dataclass(frozen=True)
class AudioShape:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    conv_channels: int


@dataclass(frozen=True)
class DrafterShape:
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int


@dataclass(frozen=True)
class CheckpointSize:
    name: str
    text: TextShape
    vision: VisionShape
    audio: AudioShape
    drafter: DrafterShape
    dtype: str = "float32"
    """Saved weight dtype (vLLM's dtype=auto follows it): float32 for tests, bfloat16 like E2B."""
    built_in_dtype: bool = False
    """Initialise the weights in ``dtype`` (E2B in float32 would need 20 GB); the small sizes keep
    float32 initialisation then a cast, so their bytes stay what they were."""
    final_norm_scale: float = 50.0
    """The final norm's weights are multiplied by this: random weights' logits are near-flat, and
    a large scale makes them decisive (varied, repeating output); a small one keeps them near-flat,
    where one different bit changes a token (the strictest parity oracle)."""
    branch_scale: float = 1.0
    """Every layer's branch output norms (after attention, the MLP and the per-layer input) are
    multiplied by this. Below 1 the token's own embedding dominates the residual stream, and with
    tied embeddings a random model then repeats the token it just wrote: a reply that repeats, so
    prompt-lookup drafts are accepted (``repeating``); its stop tokens' embeddings are zero, so a
    reply runs to its token budget. The shapes, and so every step's cost, stay."""


S, F = "sliding_attention", "full_attention"
T = TypeVar("T")

TINY = CheckpointSize(
    name="tiny",
    text=TextShape(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        layer_types=(S, S, F, S, S, F),
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=64,
        num_kv_shared_layers=2,
        hidden_size_per_layer_input=16,
        sliding_window=128,
        max_position_embeddings=32768,
    ),
    vision=VisionShape(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, head_dim=16
    ),
    audio=AudioShape(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, conv_channels=16),
    drafter=DrafterShape(hidden_size=64, intermediate_size=128, num_attention_heads=2),
)

BENCH = CheckpointSize(
    name="bench",
    text=TextShape(
        vocab_size=32768,
        hidden_size=768,
        intermediate_size=3072,
        layer_types=(S, S, S, S, F) * 2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        global_head_dim=512,
        num_kv_shared_layers=4,
        hidden_size_per_layer_input=64,
        sliding_window=512,
        max_position_embeddings=131072,
    ),
    vision=VisionShape(
        hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=2, head_dim=64
    ),
    audio=AudioShape(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, conv_channels=32),
    drafter=DrafterShape(hidden_size=256, intermediate_size=1024, num_attention_heads=4),
    dtype="bfloat16",
)

DEMO = CheckpointSize(
    name="demo",
    text=TextShape(
        vocab_size=8192,
        hidden_size=256,
        intermediate_size=1024,
        layer_types=(S, S, F, S, S, F),
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=64,
        global_head_dim=128,
        num_kv_shared_layers=2,
        hidden_size_per_layer_input=32,
        sliding_window=256,
        max_position_embeddings=32768,
    ),
    vision=VisionShape(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, head_dim=32
    ),
    audio=AudioShape(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, conv_channels=16),
    drafter=DrafterShape(hidden_size=256, intermediate_size=1024, num_attention_heads=4),
    dtype="bfloat16",
)
"""The trained demo model's shape (``gemma-chat train-demo``): a 10M-parameter Gemma 4."""


def _shape(cls: type[T], config: dict[str, Any], **given: Any) -> T:
    """``cls`` with each field read from ``config`` by its name, or from ``given``."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: given[name] if name in given else config[name] for name in names})


def e2b() -> CheckpointSize:
    """Gemma 4 E2B's exact shape, read from ``assets/gemma4_e2b_config.json`` (random weights: for
    memory, start-up and step time at the real scale; about 8.7 GB in bfloat16 plus a 148 MB drafter
    of the published assistant's size, ~74M parameters)."""
    import json

    from backend.assets import asset

    config = json.loads(asset("gemma4_e2b_config.json").read_text())
    text, vision, audio = config["text_config"], config["vision_config"], config["audio_config"]
    return CheckpointSize(
        name="e2b",
        text=_shape(TextShape, text, layer_types=tuple(text["layer_types"])),
        vision=_shape(VisionShape, vision),
        audio=_shape(AudioShape, audio, conv_channels=audio["subsampling_conv_channels"][-1]),
        drafter=DrafterShape(hidden_size=256, intermediate_size=2048, num_attention_heads=4),
        dtype="bfloat16",
        built_in_dtype=True,
    )


def e2b_layers() -> CheckpointSize:
    """E2B's layers at their real widths — hidden 1,536, MLP 6,144 (double-wide on KV-sharing
    layers), 8 query heads of 256 (sliding) and 512 (full), per-layer inputs of 256, KV sharing —
    but 6 layers (both kinds shared) and a 16,384-token vocabulary: every layer type and matmul
    shape E2B verifies, at about 600 MB (the tests' checkpoint for exact verification at E2B's
    shapes)."""
    full = e2b()
    text = replace(
        full.text,
        vocab_size=16384,
        layer_types=(S, S, F, S, S, F),
        num_kv_shared_layers=2,
        max_position_embeddings=32768,
    )
    return replace(full, name="e2b-layers", text=text, vision=BENCH.vision, audio=BENCH.audio)


REPEATING_BRANCH_SHARE = 0.4
"""A repeating checkpoint's branch norms put out this share of the token embedding's RMS (the
initializer's 0.02 times ``sqrt(hidden)``, the embedding scale). Measured with transformers' greedy
``generate`` (96 tokens, k = 3 prompt-lookup drafts simulated) on ``e2b-layers``, whose embedding
RMS is 0.78: branches at 1.0 (unscaled) gave runs of one token broken by changes (2.5 tokens a step
possible), at 0.3 (this share) a reply of one or two tokens (3.4), at 0.1 one token (3.6)."""
INITIALIZER_RANGE = 0.02
"""transformers' Gemma 4 weight initialisation (``initializer_range``)."""


def repeating(size: CheckpointSize) -> CheckpointSize:
    """``size`` whose random reply repeats (``branch_scale``): the same shapes and step costs, with
    drafts accepted at several tokens a step — for measuring speculation at a size whose real
    weights are not here (``make-model --repeating``)."""
    embedding_rms = INITIALIZER_RANGE * size.text.hidden_size**0.5
    scale = round(REPEATING_BRANCH_SHARE * embedding_rms, 4)
    return replace(size, name=f"{size.name}-repeating", branch_scale=scale)


SIZES = {size.name: size for size in (TINY, BENCH)}
"""The fixed sizes; ``e2b()`` and ``e2b_layers()`` are read from E2B's config when asked for
(``size_named``)."""
SIZE_NAMES = (*SIZES, "e2b-layers", "e2b")


def size_named(name: str) -> CheckpointSize:
    if name == "e2b":
        return e2b()
    return e2b_layers() if name == "e2b-layers" else SIZES[name]
