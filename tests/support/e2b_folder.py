"""An E2B-shaped model folder without weights: the shipped ``config.json``, a sparse
``model.safetensors`` of the real checkpoint's size (no disk used; nothing can load it), and a
sibling ``<name>-assistant`` drafter folder (a Gemma 4 assistant config of E2B's widths; the
drafter's own depth and width are not published, so they are stand-ins)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from backend.assets import asset

E2B_WEIGHT_BYTES = 10_246_000_000
"""About the published checkpoint's size (shared/GEMMA4.md: "about 9.8 GB" of BF16; 5.1B x 2)."""
ASSISTANT_WEIGHT_BYTES = 156_000_000
"""78M parameters x 2 bytes (the model card's count)."""
MODEL_NAME = "gemma-4-E2B-it"


def sparse_safetensors(path: Path, size: int) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(header)) + header)
        out.truncate(size)


def assistant_config() -> dict[str, object]:
    from transformers import Gemma4AssistantConfig, Gemma4TextConfig

    e2b = json.loads(asset("gemma4_e2b_config.json").read_text())["text_config"]
    text = Gemma4TextConfig(
        **{
            **{k: v for k, v in e2b.items() if k not in ("model_type", "dtype")},
            "hidden_size": 256,
            "intermediate_size": 2048,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "num_kv_shared_layers": 2,
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "use_double_wide_mlp": False,
        }
    )
    config = Gemma4AssistantConfig(
        text_config=text,
        backbone_hidden_size=e2b["hidden_size"],
        use_ordered_embeddings=True,
        num_centroids=2048,
        centroid_intermediate_top_k=32,
        tie_word_embeddings=True,
    )
    doc = config.to_dict()
    doc["architectures"] = ["Gemma4AssistantForCausalLM"]
    return doc


def make_e2b_folder(root: Path, assistant: bool = True) -> Path:
    """``root/gemma-4-E2B-it`` (and ``root/gemma-4-E2B-it-assistant``); returns the model folder."""
    model = root / MODEL_NAME
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(asset("gemma4_e2b_config.json").read_text())
    sparse_safetensors(model / "model.safetensors", E2B_WEIGHT_BYTES)
    if assistant:
        drafter = root / f"{MODEL_NAME}-assistant"
        drafter.mkdir(exist_ok=True)
        (drafter / "config.json").write_text(json.dumps(assistant_config(), indent=2))
        sparse_safetensors(drafter / "model.safetensors", ASSISTANT_WEIGHT_BYTES)
    return model


if __name__ == "__main__":
    import sys

    print(make_e2b_folder(Path(sys.argv[1])))
