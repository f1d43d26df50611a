"""Write a random-weight Gemma 4 checkpoint (text, vision and audio towers) and its MTP drafter.

``make_checkpoint(out, size, seed)`` writes two directories loadable by transformers and
by vLLM: ``out/model`` (``Gemma4ForConditionalGeneration`` with tokenizer, chat template
and processor configs) and ``out/drafter`` (``Gemma4AssistantForCausalLM``, the form of
``google/gemma-4-E2B-it-assistant``: plain embeddings, or with ``centroids`` the released
assistant's centroid-masked ones, which score only the tokens of the clusters its centroids
pick). Same size, seed and centroids, same bytes.

Random weights give nearly flat logits, where greedy argmax is decided by rounding
noise. The final norm is scaled up (``CheckpointSize.final_norm_scale``) so the logits are decisive and
the output varied; the final soft-cap keeps them bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.checkpoints.sizes import CheckpointSize, TextShape, size_named
from backend.checkpoints.tokenizer import NAMED_TOKENS, STOP_TOKEN_IDS, TOKEN_ID, write_tokenizer

IMAGE_SOFT_TOKENS = 280  # the processor's default budget; vLLM requires default_output_length == it
MODEL_DIR, DRAFTER_DIR = "model", "drafter"
MANIFEST = "gemma-chat-checkpoint.json"
"""Written last, into the folder holding both: what made the checkpoint, and that gemma-chat did."""


BRANCH_NORMS = re.compile(
    r"\.(post_attention_layernorm|post_feedforward_layernorm|post_per_layer_input_norm)\."
)
"""The norms each layer's branch passes through before it joins the residual stream."""


@dataclass(frozen=True)
class GeneratedCheckpoint:
    model: Path
    drafter: Path


def text_config_kwargs(text: TextShape) -> dict[str, Any]:
    return {
        "vocab_size": text.vocab_size,
        "hidden_size": text.hidden_size,
        "intermediate_size": text.intermediate_size,
        "num_hidden_layers": len(text.layer_types),
        "layer_types": list(text.layer_types),
        "num_attention_heads": text.num_attention_heads,
        "num_key_value_heads": text.num_key_value_heads,
        "head_dim": text.head_dim,
        "global_head_dim": text.global_head_dim,
        "num_kv_shared_layers": text.num_kv_shared_layers,
        "hidden_size_per_layer_input": text.hidden_size_per_layer_input,
        "vocab_size_per_layer_input": text.vocab_size,
        "use_double_wide_mlp": True,
        "sliding_window": text.sliding_window,
        "max_position_embeddings": text.max_position_embeddings,
        "final_logit_softcapping": 30.0,
        "pad_token_id": TOKEN_ID["<pad>"],
        "bos_token_id": TOKEN_ID["<bos>"],
        "eos_token_id": list(STOP_TOKEN_IDS),
        "tie_word_embeddings": True,
    }


def model_config(size: CheckpointSize) -> Any:
    from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4TextConfig, Gemma4VisionConfig

    vllm_only: dict[str, Any] = {"default_output_length": IMAGE_SOFT_TOKENS}  # unknown to transformers
    vision = Gemma4VisionConfig(
        hidden_size=size.vision.hidden_size,
        intermediate_size=size.vision.intermediate_size,
        num_hidden_layers=size.vision.num_hidden_layers,
        num_attention_heads=size.vision.num_attention_heads,
        num_key_value_heads=size.vision.num_attention_heads,
        head_dim=size.vision.head_dim,
        pooling_kernel_size=3,
        patch_size=16,
        position_embedding_size=1024,
        **vllm_only,
    )
    audio = Gemma4AudioConfig(
        hidden_size=size.audio.hidden_size,
        num_hidden_layers=size.audio.num_hidden_layers,
        num_attention_heads=size.audio.num_attention_heads,
        subsampling_conv_channels=[128, size.audio.conv_channels],  # [0] must be the 128 mel bins
        output_proj_dims=size.text.hidden_size,
    )
    return Gemma4Config(
        text_config=Gemma4TextConfig(**text_config_kwargs(size.text)),
        vision_config=vision,
        audio_config=audio,
        tie_word_embeddings=True,
        **config_token_ids(),
    )


def config_token_ids() -> dict[str, Any]:
    """The top-level ``Gemma4Config`` token ids of our tokenizer (vLLM matches them against it)."""
    return {
        "boi_token_id": TOKEN_ID["<|image>"],
        "eoi_token_id": TOKEN_ID["<image|>"],
        "image_token_id": TOKEN_ID["<|image|>"],
        "video_token_id": TOKEN_ID["<|video|>"],
        "boa_token_id": TOKEN_ID["<|audio>"],
        "eoa_token_index": TOKEN_ID["<audio|>"],
        "audio_token_id": TOKEN_ID["<|audio|>"],
        "pad_token_id": TOKEN_ID["<pad>"],
        "bos_token_id": TOKEN_ID["<bos>"],
        "eos_token_id": list(STOP_TOKEN_IDS),
    }


CENTROID_TOP_K_SHARE = 8
"""With centroids, each draft scores the clusters of its best 1/8 of them (the released
assistant: 32 of 2048, 1/64, of a 512x larger vocabulary)."""


def drafter_config(size: CheckpointSize, centroids: int = 0) -> Any:
    """The drafter's config; ``centroids`` > 0 gives it centroid-masked embeddings (``vocab_size``
    must be a multiple of it)."""
    from transformers import Gemma4AssistantConfig, Gemma4TextConfig

    if centroids and size.text.vocab_size % centroids:
        raise ValueError(f"{centroids} centroids do not divide a vocabulary of {size.text.vocab_size}")

    text = size.text
    # The drafter's layers own no KV: they read the target's last sliding and last full layer.
    layer_types = ["sliding_attention", "full_attention"]
    drafter_text = Gemma4TextConfig(
        **{
            **text_config_kwargs(text),
            "hidden_size": size.drafter.hidden_size,
            "intermediate_size": size.drafter.intermediate_size,
            "num_attention_heads": size.drafter.num_attention_heads,
            "num_hidden_layers": len(layer_types),
            "layer_types": layer_types,
            "num_kv_shared_layers": len(layer_types),
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "use_double_wide_mlp": False,
        }
    )
    return Gemma4AssistantConfig(
        text_config=drafter_text,
        backbone_hidden_size=text.hidden_size,
        use_ordered_embeddings=bool(centroids),
        num_centroids=centroids or 2048,
        centroid_intermediate_top_k=max(1, centroids // CENTROID_TOP_K_SHARE) if centroids else 32,
        tie_word_embeddings=True,
    )


def write_generation_config(out: Path) -> None:
    """Write ``generation_config.json``: greedy by default, stopping on our tokenizer's stop ids."""
    config = {
        "bos_token_id": TOKEN_ID["<bos>"],
        "pad_token_id": TOKEN_ID["<pad>"],
        "eos_token_id": list(STOP_TOKEN_IDS),
        "do_sample": False,
    }
    (out / "generation_config.json").write_text(json.dumps(config, indent=2) + "\n")


def write_processor_config(out: Path) -> None:
    """Write ``processor_config.json`` for ``Gemma4Processor`` (image, audio and video settings)."""
    processor = {
        "processor_class": "Gemma4Processor",
        "image_seq_length": IMAGE_SOFT_TOKENS,
        "audio_seq_length": 750,
        "audio_ms_per_token": 40,
        "image_processor": {
            "image_processor_type": "Gemma4ImageProcessor",
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "max_soft_tokens": IMAGE_SOFT_TOKENS,
            "do_resize": True,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": False,
            "do_convert_rgb": True,
        },
        "feature_extractor": {
            "feature_extractor_type": "Gemma4AudioFeatureExtractor",
            "feature_size": 128,
            "sampling_rate": 16000,
        },
        "video_processor": {
            "video_processor_type": "Gemma4VideoProcessor",
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "max_soft_tokens": 70,
            "num_frames": 32,
            "do_sample_frames": True,
        },
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2) + "\n")


def _seeded_model(config: Any, cls_name: str, seed: int, dtype: str, built_in_dtype: bool = False) -> Any:
    import torch
    import transformers

    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    if built_in_dtype:
        torch.set_default_dtype(getattr(torch, dtype))
    try:
        model = getattr(transformers, cls_name)(config)
    finally:
        torch.set_default_dtype(default)
    return model.to(getattr(torch, dtype)).eval()


def make_checkpoint(
    out: Path, size: str | CheckpointSize = "tiny", seed: int = 0, centroids: int = 0
) -> GeneratedCheckpoint:
    """Write ``out/model`` and ``out/drafter`` (with ``centroids``: centroid-masked embeddings);
    return their paths. The model does not depend on ``centroids``."""
    import torch

    shape = size_named(size) if isinstance(size, str) else size
    model = _seeded_model(
        model_config(shape), "Gemma4ForConditionalGeneration", seed, shape.dtype, shape.built_in_dtype
    )
    with torch.no_grad():
        text_model = model.model.language_model
        text_model.norm.weight.mul_(shape.final_norm_scale)
        if shape.branch_scale != 1.0:
            for name, weight in text_model.named_parameters():
                if BRANCH_NORMS.search(name):
                    weight.mul_(shape.branch_scale)
            # a repeating reply runs to its token budget: the stop tokens' (tied) embeddings score 0
            text_model.embed_tokens.weight[list(STOP_TOKEN_IDS)] = 0
    drafter = _seeded_model(
        drafter_config(shape, centroids),
        "Gemma4AssistantForCausalLM",
        seed + 1,
        shape.dtype,
        shape.built_in_dtype,
    )
    if centroids:  # which tokens each centroid's cluster holds: a seeded permutation of the vocabulary
        ordering = torch.randperm(shape.text.vocab_size, generator=torch.Generator().manual_seed(seed + 2))
        drafter.masked_embedding.token_ordering.copy_(ordering)

    def tokenizer(directory: Path) -> None:
        write_tokenizer(directory, shape.text.vocab_size, shape.text.max_position_embeddings)

    manifest = {
        "generator": "gemma-chat make-model",
        "size": shape.name,
        "seed": seed,
        **({"branch_scale": shape.branch_scale} if shape.branch_scale != 1.0 else {}),
        **({"centroids": centroids} if centroids else {}),
    }
    return save_checkpoint(out, model, drafter, tokenizer, manifest)


def save_checkpoint(
    out: Path, model: Any, drafter: Any, write_tokenizer_to: Callable[[Path], None], manifest: dict[str, Any]
) -> GeneratedCheckpoint:
    """Save a model/drafter pair with tokenizer, generation and processor configs and the manifest."""
    model_dir, drafter_dir = out / MODEL_DIR, out / DRAFTER_DIR
    model_dir.mkdir(parents=True, exist_ok=True)
    drafter_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    drafter.save_pretrained(drafter_dir)
    for directory in (model_dir, drafter_dir):
        write_tokenizer_to(directory)
        write_generation_config(directory)
    write_processor_config(model_dir)
    manifest = {**manifest, "named": NAMED_TOKENS}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return GeneratedCheckpoint(model=model_dir, drafter=drafter_dir)
