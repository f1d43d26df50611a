"""A weightless Gemma 4 E2B checkpoint directory, for vLLM's ``load_format="dummy"``.

``assets/gemma4_e2b_config.json`` holds the real E2B architecture (text, vision and audio
towers) from the published values in ``shared/GEMMA4.md``, with transformers 5.19's
``Gemma4Config`` defaults where those give no value (the vision and audio tower shapes).
``make_dummy_checkpoint`` writes it beside our generated tokenizer, chat template, generation
and processor configs, so an engine can start on E2B-sized random weights without the 10 GB
download: right for speed, meaningless for text.

Two deliberate differences from the real model:
- the config's token ids (image/audio markers, pad/bos/eos) are rewritten to our tokenizer's,
  which vLLM's multimodal processor matches against the tokenizer;
- our tokenizer is byte-level (about one token per byte, some 4x more prompt tokens than
  Gemma's for English) but is written with the real vocabulary size (262144, ``<unused_N>``
  fillers), so every id the model can emit decodes to text. A smaller tokenizer would also
  load: vLLM checks prompt ids against the larger of tokenizer and model vocabulary, and its
  detokenizer turns ids past the tokenizer's end into empty text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.assets import asset
from backend.checkpoints.tokenizer import write_tokenizer
from backend.checkpoints.writer import config_token_ids, write_generation_config, write_processor_config

E2B_CONFIG_ASSET = "gemma4_e2b_config.json"
TEXT_TOKEN_FIELDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def e2b_config() -> dict[str, Any]:
    """The real Gemma 4 E2B ``config.json``, as shipped in ``assets/``."""
    config: dict[str, Any] = json.loads(asset(E2B_CONFIG_ASSET).read_text())
    return config


def dummy_e2b_config() -> dict[str, Any]:
    """The E2B config with our tokenizer's token ids in place of Gemma's."""
    config = e2b_config()
    ids = config_token_ids()
    config.update(ids)
    config["text_config"].update({field: ids[field] for field in TEXT_TOKEN_FIELDS})
    return config


def make_dummy_checkpoint(out_dir: Path | str) -> Path:
    """Write config, tokenizer, chat template, generation and processor configs (no weights)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = dummy_e2b_config()
    text = config["text_config"]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_tokenizer(out, text["vocab_size"], text["max_position_embeddings"])
    write_generation_config(out)
    write_processor_config(out)
    return out
