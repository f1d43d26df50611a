"""What one engine of a Gemma 4 checkpoint needs of a GPU, before it starts.

* Weights: the checkpoint's ``*.safetensors`` tensors (measured: each file's header), each
  floating-point tensor at the width the engine loads it in — the asked dtype, or with ``auto`` the
  config's, float32 downcast to bfloat16 as vLLM's ``auto`` does (``_resolve_auto_dtype``): a
  bfloat16 checkpoint run in float32 takes twice its size on disk. For a model that is only
  described (``assets/gemma4_e2b_config.json``), its parameters counted from ``config.json`` times
  that width (an estimate).
* The drafter's weights the same way (the optimized path with MTP only).
* KV cache for one request of the context window, from the config's KV-owning layers (computed).
* The engine's runtime — CUDA context, the activation peak of vLLM's profiling run, CUDA graphs —
  ``RUNTIME_BYTES``, an estimate set from vLLM's Gemma 4 recipe (13 GB the smallest card for E2B,
  whose weights are about 10.2 GB).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
RUNTIME_BYTES = int(2.5 * GIB)
"""Per engine: CUDA context (~0.5 GiB), profiling activations and sampler (vocab 262144), CUDA
graphs. An estimate: vLLM's recipe gives 13 GB as E2B's minimum, about 2.6 GiB above its weights."""
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class Size:
    """A number of bytes and whether it was read from disk (measured) or worked out (estimated)."""

    bytes: int
    measured: bool
    how: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB

    def text(self) -> str:
        kind = "measured" if self.measured else "estimate"
        return f"{self.gib:.2f} GiB ({kind}: {self.how})"


@dataclass(frozen=True)
class Footprint:
    """One engine's needs, by part; ``total`` is what its share of GPU memory must hold."""

    weights: Size
    drafter: Size | None
    kv: Size
    runtime: Size

    @property
    def total(self) -> int:
        return sum(part.bytes for part in self.parts())

    @property
    def total_gib(self) -> float:
        return self.total / GIB

    @property
    def measured(self) -> bool:
        return all(part.measured for part in self.parts())

    def parts(self) -> list[Size]:
        return [self.weights, *([self.drafter] if self.drafter else []), self.kv, self.runtime]

    def lines(self) -> list[str]:
        rows = [("weights", self.weights), ("drafter", self.drafter), ("KV cache", self.kv)]
        rows.append(("runtime", self.runtime))
        return [f"{name}: {size.text()}" for name, size in rows if size is not None]


def _config(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / "config.json").read_text()))


def _text(config: dict[str, Any]) -> dict[str, Any]:
    return dict(config.get("text_config") or config)


def layer_head_dim(text: dict[str, Any], index: int, kind: str) -> int:
    """A layer's head size: transformers 5 writes it per layer (``per_layer_config``: ``{"04":
    {"head_dim": 512}}``), the published config as ``global_head_dim`` for the full layers."""
    for key, values in (text.get("per_layer_config") or {}).items():
        if str(key).isdigit() and int(key) == index and isinstance(values, dict) and "head_dim" in values:
            return int(values["head_dim"])
    if kind == "full_attention":
        return int(text.get("global_head_dim") or text["head_dim"])
    return int(text["head_dim"])


def _dtype_bytes(config: dict[str, Any], dtype: str) -> int:
    """The width the engine holds the weights (and KV cache) in: ``dtype``, or for ``auto`` the
    config's dtype, float32 downcast to bfloat16 (vLLM's ``auto`` on every platform whose first
    supported dtype is bfloat16: CUDA and x86 CPUs)."""
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    named = str(_text(config).get("dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return 2 if named == "float32" else DTYPE_BYTES.get(named, 2)


FLOAT_WIDTHS = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}
"""safetensors' floating-point dtypes the engine casts to its dtype (others are loaded as stored)."""
MAX_HEADER = 100 * 2**20


def loaded_bytes(files: list[Path], width: int) -> int | None:
    """The tensors of ``files`` as the engine holds them: floating-point ones at ``width`` bytes an
    element, the rest as stored; None where a header cannot be read or does not describe its file's
    bytes (the bytes on disk then)."""
    total = 0
    for path in files:
        try:
            with path.open("rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                if not 0 < size <= MAX_HEADER:
                    return None
                header = json.loads(handle.read(size))
            on_disk = path.stat().st_size
        except (OSError, ValueError):
            return None
        if not isinstance(header, dict):
            return None
        described = 0
        for name, tensor in header.items():
            if name == "__metadata__" or not isinstance(tensor, dict):
                continue
            try:
                start, end = (int(offset) for offset in tensor["data_offsets"])
                stored = FLOAT_WIDTHS.get(str(tensor["dtype"]))
            except (KeyError, TypeError, ValueError):
                return None
            described += end - start
            total += end - start if stored is None else (end - start) // stored * width
        if 8 + size + described < on_disk * 0.99:  # bytes its header does not describe
            return None
    return total


def text_parameters(text: dict[str, Any]) -> int:
    """Parameters of a Gemma 4 text stack from its config (embeddings, per-layer inputs, layers)."""
    hidden, inter = int(text["hidden_size"]), int(text["intermediate_size"])
    layers = list(text.get("layer_types") or ["full_attention"] * int(text["num_hidden_layers"]))
    heads, kv_heads = int(text["num_attention_heads"]), int(text["num_key_value_heads"])
    shared = int(text.get("num_kv_shared_layers", 0))
    per_layer = int(text.get("hidden_size_per_layer_input", 0))
    vocab, vocab_pl = int(text["vocab_size"]), int(text.get("vocab_size_per_layer_input", 0))
    total = vocab * hidden + vocab_pl * len(layers) * per_layer + hidden * len(layers) * per_layer
    for index, kind in enumerate(layers):
        dim = layer_head_dim(text, index, kind)
        total += 2 * hidden * heads * dim + 2 * hidden * kv_heads * dim
        wide = 2 if text.get("use_double_wide_mlp") and index >= len(layers) - shared else 1
        total += 3 * hidden * inter * wide + 2 * hidden * per_layer
    return total


def tower_parameters(config: dict[str, Any]) -> int:
    """Vision (transformer) and audio (conformer) towers, from their widths and depths."""
    total = 0
    vision = config.get("vision_config") or {}
    if vision:
        h, i = int(vision["hidden_size"]), int(vision.get("intermediate_size", 4 * vision["hidden_size"]))
        total += int(vision["num_hidden_layers"]) * (4 * h * h + 3 * h * i)
    audio = config.get("audio_config") or {}
    if audio:
        h = int(audio["hidden_size"])
        total += int(audio["num_hidden_layers"]) * 24 * h * h  # two macaron FFNs (4x), attention, conv
    return total


def checkpoint_size(directory: Path, dtype: str = "auto") -> Size:
    """Weights on disk, or counted from the config where the folder has none (a described model)."""
    files = sorted(directory.glob("*.safetensors"))
    if files:
        on_disk = sum(f.stat().st_size for f in files)
        config = _config(directory) if (directory / "config.json").is_file() else {}
        width = _dtype_bytes(config, dtype)
        loaded = loaded_bytes(files, width)
        if loaded is not None and abs(loaded - on_disk) > on_disk // 100:
            how = f"{len(files)} weight files, {on_disk / GIB:.2f} GiB on disk, held at {width} bytes each"
            return Size(loaded, True, how)
        return Size(on_disk, True, f"{len(files)} weight files on disk")
    files = sorted(directory.glob("*.bin"))
    if files:
        return Size(sum(f.stat().st_size for f in files), True, f"{len(files)} weight files on disk")
    config = _config(directory)
    published = config.get("_published_parameters")
    if published:
        params, how = int(published), "the model card's parameter count"
    else:
        params, how = text_parameters(_text(config)) + tower_parameters(config), "counted from config.json"
    width = _dtype_bytes(config, dtype)
    return Size(params * width, False, f"{params / 1e9:.2f}B parameters {how} x {width} bytes")


def kv_bytes_per_request(directory: Path, tokens: int, dtype: str = "auto") -> Size:
    """KV cache for one request of ``tokens``: KV-owning layers only; sliding ones hold their window."""
    config = _config(directory)
    text = _text(config)
    layers = list(text.get("layer_types") or ["full_attention"] * int(text["num_hidden_layers"]))
    owning = layers[: len(layers) - int(text.get("num_kv_shared_layers", 0))]
    width, kv_heads = _dtype_bytes(config, dtype), int(text["num_key_value_heads"])
    total = 0
    for index, kind in enumerate(owning):
        dim = layer_head_dim(text, index, kind)
        if kind == "full_attention":
            total += 2 * kv_heads * dim * width * tokens
        else:
            window = min(tokens, int(text.get("sliding_window") or tokens))
            total += 2 * kv_heads * dim * width * window
    return Size(total, False, f"{tokens} tokens on {len(owning)} KV-owning layers, computed from config.json")


def engine_footprint(model: Path, drafter: Path | None, tokens: int, dtype: str = "auto") -> Footprint:
    return Footprint(
        weights=checkpoint_size(model, dtype),
        drafter=checkpoint_size(drafter, dtype) if drafter is not None else None,
        kv=kv_bytes_per_request(model, tokens, dtype),
        runtime=Size(RUNTIME_BYTES, False, "CUDA context, activations, CUDA graphs; from vLLM's recipe"),
    )
