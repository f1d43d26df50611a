"""The card's context window counts the KV cache as vLLM's own start check does (issue 57, item
6d): ``gpu_window.vllm_kv_bytes`` against vLLM 0.32's functions on a faked card
(``tests/support/vllm_kv_count.py``), for both paths' arguments and windows from the floor to E2B's
maximum. The windows themselves on described cards are in ``tests/engine/gpu/test_gpu_card.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backend.engine.gpu.card import GpuFacts
from backend.engine.gpu.window import BLOCK_TOKENS, in_flight_tokens, kv_layers, vllm_kv_bytes
from backend.engine.model.footprint import GIB, kv_bytes_per_request
from tests.support.e2b_folder import make_e2b_folder

ROOT = Path(__file__).resolve().parents[3]
L4 = GpuFacts("NVIDIA L4", 24 * GIB, 24 * GIB, (8, 9))
"""The card ``tests/support/vllm_kv_count.py`` fakes."""
H100 = GpuFacts("NVIDIA H100 80GB HBM3", 80 * GIB, 80 * GIB, (9, 0))


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def vllm_counts(e2b: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "vllm_kv_count.py"), str(e2b)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("VLLM-KV-COUNT ")), None)
    assert line is not None, done.stderr[-3000:]
    return dict(json.loads(line.split(" ", 1)[1]))


def test_the_windows_kv_is_vllms_own_count_on_both_paths(e2b: Path, vllm_counts: dict[str, Any]) -> None:
    layers = kv_layers(e2b, "auto")
    assert (layers.full, layers.sliding, layers.window) == (3, 12, 512)
    for path in ("baseline", "optimized"):
        counted = vllm_counts[path]
        assert counted["block_size"] == BLOCK_TOKENS
        assert counted["in_flight"] == in_flight_tokens(L4) == 4096, (
            "two steps of `vllm serve`'s 2,048 tokens"
        )
        assert counted["groups"] == [3, 3, 3, 3, 3], "4 sliding groups and 1 full, 3 layers each"
        for window, need in counted["need"].items():
            assert vllm_kv_bytes(layers, int(window), in_flight_tokens(L4)) == need, (path, window)


def test_vllms_count_is_above_the_configs_most_at_short_windows(e2b: Path) -> None:
    """Why the config's count is no measure of what vLLM needs: a sliding layer is charged its window
    plus the tokens in flight (16,384 on an H100, where `vllm serve` schedules 8,192 a step), which
    a short window cannot amortise."""
    layers = kv_layers(e2b, "auto")
    ratios = [
        vllm_kv_bytes(layers, tokens, in_flight_tokens(H100)) / kv_bytes_per_request(e2b, tokens).bytes
        for tokens in (8192, 131072)
    ]
    assert ratios[0] == pytest.approx(2.68, abs=0.01) and ratios[1] == pytest.approx(1.25, abs=0.01)
    float32 = kv_layers(e2b, "float32")
    assert float32.full_bytes_per_token == 2 * layers.full_bytes_per_token
