"""What a card gives (issue 43): the context window from what the memory plan leaves each path for
KV, up to the model's maximum — not from the host's RAM (item 3); swap that says what stays on the
card and in host memory, and stops engines where the host cannot hold a sleeping one (item 4); a
12 GB card offered a tight run with the risk said (item 7); a speculation choice kept per card and
per mode (item 1). E2B-shaped folder, described cards;
vLLM's own config classes accept the arguments in ``tests/engine/gpu/test_gpu_vllm_config.py``'s
faked platform."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backend.config.settings import EngineSettings
from backend.engine.gpu.card import GpuRefused, described_gpu
from backend.engine.gpu.window import FLOOR, STEP, WINDOW_MARGIN, in_flight_tokens, kv_layers, vllm_kv_bytes
from backend.engine.model.footprint import GIB
from backend.engine.model.source import resolve
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.paths.placement import plan_for
from tests.support.e2b_folder import make_e2b_folder

ROOT = Path(__file__).resolve().parents[3]
PATHS = (EnginePath.optimized(), EnginePath.baseline())


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


def _windows(model: Path, gib: float, capability: tuple[int, int] = (8, 9), **settings: Any) -> list[Any]:
    source, chosen = resolve(str(model)), EngineSettings(**settings)
    plan = plan_for(source, chosen, described_gpu(gib, capability))
    return [engine_config(path, source, chosen, 1, plan).args["max_model_len"] for path in PATHS]


def _paths(model: Path, home: Path, *card: str) -> str:
    """``gemma-chat paths --model MODEL CARD...`` in a fresh home: its output (status 0)."""
    shown = subprocess.run(
        [sys.executable, "-m", "app.cli", "paths", "--model", str(model), *card],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "GEMMA_CHAT_HOME": str(home),
            "HOME": str(home),
            "PYTHONPATH": str(ROOT),
        },
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_a_large_card_gives_the_models_whole_window_whatever_the_host_has(
    e2b: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("backend.engine.platform.default_max_model_len", lambda *_: 4096)  # a small host
    for window in _windows(e2b, 80, (9, 0)):
        assert window.value == 131072, window.reason
        assert "the model's maximum (131072)" in window.reason and "leaves 2" in window.reason


def test_a_16_gib_card_gives_the_most_that_fits_the_same_for_both_paths(e2b: Path) -> None:
    optimized, baseline = _windows(e2b, 16, gpu_memory_utilization=0.8)
    assert optimized.value == baseline.value, "flipping paths never changes a chat's room"
    tokens = int(optimized.value)
    assert FLOOR < tokens < 131072 and tokens % STEP == 0
    assert "the most that fits" in optimized.reason and "optimized path's share 0.8" in optimized.reason
    room = float(optimized.reason.split("leaves ")[1].split(" GiB")[0]) * GIB
    layers, in_flight = kv_layers(e2b, "auto"), in_flight_tokens(described_gpu(16))
    assert in_flight == 4096, "two steps of the 2,048 tokens `vllm serve` schedules on a 16 GiB Ada card"
    assert WINDOW_MARGIN * vllm_kv_bytes(layers, tokens, in_flight) <= room + 0.05 * GIB
    assert WINDOW_MARGIN * vllm_kv_bytes(layers, tokens + 2 * STEP, in_flight) > room - 0.05 * GIB
    assert tokens == 61440 and "vLLM counts 0.40 GiB for a request of 61440 tokens (4096 in flight)" in (
        optimized.reason
    )


def test_the_setting_still_wins(e2b: Path) -> None:
    for window in _windows(e2b, 80, (9, 0), max_model_len=16384):
        assert window.value == 16384 and window.reason == "context window from settings"


def test_paths_prints_the_window_with_its_arithmetic(e2b: Path, tmp_path: Path) -> None:
    out = _paths(e2b, tmp_path, "--gpu-memory", "80", "--gpu-capability", "9.0")
    assert out.count("max_model_len = 131072") == 3, "baseline, optimized, eager"
    assert "context window from the card, the model's maximum (131072): the " in out
    assert (
        "vLLM counts 0.94 GiB for a request of 131072 tokens (16384 in flight), 1.5× that is 1.42 GiB" in out
    )


def test_a_12_gb_card_is_offered_a_tight_run_and_takes_it_when_asked(e2b: Path) -> None:
    source = resolve(str(e2b))
    with pytest.raises(GpuRefused) as refused:
        plan_for(source, EngineSettings(), described_gpu(12))
    assert "gpu_memory_utilization = 0.92 to try it tight" in str(refused.value)
    assert "it may fail to start" in str(refused.value)
    plan = plan_for(source, EngineSettings(gpu_memory_utilization=0.92), described_gpu(12))
    assert plan is not None and plan.tight and plan.mode == "swap"
    assert not plan.sleep_mode, "a sleeping engine's residue would not fit: the idle one is stopped"
    assert plan.shares == {"baseline": 0.92, "optimized": 0.92}
    (note,) = [note for note in plan.notes if note.startswith("tight")]
    assert "estimated at 2.5 GiB" in note and "vLLM's own check at start decides" in note
    with pytest.raises(GpuRefused):
        plan_for(source, EngineSettings(gpu_memory_utilization=0.95), described_gpu(10))
    assert not plan_for(source, EngineSettings(), described_gpu(16)).tight  # type: ignore[union-attr]


def test_a_swap_plan_shows_the_cards_residue_and_the_hosts_weights(e2b: Path, tmp_path: Path) -> None:
    out = _paths(e2b, tmp_path, "--gpu-memory", "16")
    assert "the sleeping engine keeps about 1.0 GiB (its CUDA context ~0.5" in out
    assert "the app's own process opens no CUDA context" in out
    assert "a sleeping engine holds 9.7 GiB of weights there" in out and "needs at least 16 GiB" in out
    assert "sleep_mode_offload_cudagraph = True" in out


def test_a_host_that_cannot_hold_a_sleeping_engine_swaps_by_stopping(e2b: Path) -> None:
    from backend.engine.gpu.memory_plan import plan_memory

    source = resolve(str(e2b))
    plan = plan_for(source, EngineSettings(), described_gpu(16))
    assert plan is not None and plan.sleep_mode
    small = plan_memory(plan.gpu, plan.footprints, 0.85, host_bytes=12 * GIB)
    assert small.mode == "swap" and not small.sleep_mode
    assert any("12 GiB of RAM cannot hold a sleeping engine's 9.7 GiB" in note for note in small.notes)
    assert "nothing of it stays on the card" in small.swap_lines()[0]
    roomy = plan_memory(plan.gpu, plan.footprints, 0.85, host_bytes=64 * GIB)
    assert roomy.sleep_mode and "this machine has 64 GiB" in roomy.swap_lines()[1]


def test_a_gpu_speculation_choice_is_kept_per_card(e2b: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm.platforms

    from backend.engine.speculation.choice import choice_key

    source, settings = resolve(str(e2b)), EngineSettings()

    class Card:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_device_name(self) -> str:
            return self.name

    monkeypatch.setattr(vllm.platforms, "_current_platform", Card("NVIDIA L4"))
    l4 = choice_key(source, settings, gpu=True)
    monkeypatch.setattr(vllm.platforms, "_current_platform", Card("NVIDIA H100"))
    h100 = choice_key(source, settings, gpu=True)
    assert h100 != l4
    assert choice_key(source, EngineSettings(exact=True), gpu=True) != h100, (
        "kept per mode (issue 43, item 1)"
    )
