"""The weights' footprint at the width the engine holds them (issue 57: float32 weights were counted
at the bfloat16 size of the files on disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.engine.model.footprint import checkpoint_size


def _checkpoint(folder: Path, dtype: str) -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir()
    width = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    tensors = {"w": torch.zeros(256, 1024, dtype=width), "ids": torch.zeros(4096, dtype=torch.int64)}
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"text_config": {"dtype": dtype}}))
    return folder


@pytest.mark.parametrize(
    ("stored", "asked", "float_bytes"),
    [
        ("bfloat16", "auto", 2),
        ("bfloat16", "float32", 4),
        ("float32", "auto", 2),  # vLLM's auto downcasts a float32 checkpoint to bfloat16
        ("float32", "float32", 4),
        ("float32", "bfloat16", 2),
    ],
)
def test_weights_are_counted_at_the_width_the_engine_loads(
    tmp_path: Path, stored: str, asked: str, float_bytes: int
) -> None:
    folder = _checkpoint(tmp_path / stored, stored)
    size = checkpoint_size(folder, asked)
    assert size.measured
    held = 256 * 1024 * float_bytes + 4096 * 8
    assert held <= size.bytes <= held * 1.01, size.text()  # the file's header beside the tensors


def test_an_unreadable_header_falls_back_to_the_bytes_on_disk(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    (folder / "config.json").write_text("{}")
    assert checkpoint_size(folder, "float32").bytes == 64


def test_the_host_plan_counts_the_weights_at_the_settings_dtype(tmp_path: Path) -> None:
    """A float32 checkpoint run in float32 (the tests' own engines) is not counted at bfloat16's
    half: the host plan's estimate and the KV cache's room read the setting's width."""
    from backend.engine.cpu.host_plan import estimated_footprint
    from backend.engine.cpu.kv_size import host_room

    folder = _checkpoint(tmp_path / "f32", "float32")
    held = estimated_footprint(folder, None, 0, "float32").bytes - estimated_footprint(folder, None, 0).bytes
    assert held >= 256 * 1024 * 2, "float32 counts 4 bytes an element where auto counts 2"
    auto, f32 = host_room(folder, None), host_room(folder, None, "float32")
    assert auto is not None and f32 is not None and auto - f32 >= 256 * 1024 * 2
