"""Attention candidates only where they can start for the model here, labels from vLLM's own
selector (issue 57, item 4): FlexAttention refuses E2B's KV-shared full layers, FlashInfer without
its precompiled kernels compiles or downloads them at start, and on a B200 vLLM picks FlashInfer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.assets import asset
from backend.engine.gpu import attention as gpu_attention
from backend.engine.gpu import flashinfer_kernels
from backend.engine.gpu.attention import (
    FULL_FLASHINFER,
    FULL_FLEX_ATTENTION,
    SLIDING_FLASH_ATTENTION,
    VLLM_PRIORITY,
    ModelAttention,
    attention_candidates,
    expected_attention,
    vllm_attention,
)
from tests.engine.gpu.test_gpu_card import _paths
from tests.support.e2b_folder import make_e2b_folder

ROOT = Path(__file__).resolve().parents[3]
SHARING_NOT_SUPPORTED = "'FlexAttention does not support kv sharing yet'"


def _model(tmp_path: Path, **text: object) -> ModelAttention:
    """E2B's shipped config, its text part changed by ``text``."""
    config = json.loads(asset("gemma4_e2b_config.json").read_text())
    config["text_config"].update(text)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return ModelAttention.read(tmp_path)


@pytest.fixture
def kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer's precompiled kernels installed (as ``vllm download-kernels`` leaves them)."""
    monkeypatch.setattr(gpu_attention, "flashinfer_kernels_missing", lambda: "")


def test_e2b_shares_kv_in_four_full_layers(tmp_path: Path) -> None:
    """35 layers, the last 20 read earlier layers' KV; full layers every fifth: 19, 24, 29, 34."""
    e2b = _model(tmp_path)
    assert e2b == ModelAttention(kv_shared_full_layers=4)
    assert SHARING_NOT_SUPPORTED in e2b.flex_refusal()


def test_e2b_on_an_a10_offers_no_flex_attention(tmp_path: Path, kernels: None) -> None:
    candidates = attention_candidates((8, 6), _model(tmp_path))
    assert candidates.others == (SLIDING_FLASH_ATTENTION, FULL_FLASHINFER)
    ((config, why),) = candidates.left_out
    assert config == FULL_FLEX_ATTENTION and "4 KV-shared full layers" in why


def test_a_model_without_kv_sharing_may_run_flex_attention(tmp_path: Path, kernels: None) -> None:
    candidates = attention_candidates((8, 9), _model(tmp_path, num_kv_shared_layers=0))
    assert candidates.others == (SLIDING_FLASH_ATTENTION, FULL_FLASHINFER, FULL_FLEX_ATTENTION)
    assert candidates.left_out == ()
    capped = attention_candidates(
        (8, 9), _model(tmp_path, num_kv_shared_layers=0, attn_logit_softcapping=50.0)
    )
    assert FULL_FLEX_ATTENTION not in capped.others, "vLLM's FlexAttention refuses soft-capping too"


def test_flashinfer_is_left_out_without_its_precompiled_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "FlashInfer's precompiled kernels are missing (flashinfer-cubin not installed)"
    monkeypatch.setattr(gpu_attention, "flashinfer_kernels_missing", lambda: why)
    candidates = attention_candidates((8, 0), _model(tmp_path, num_kv_shared_layers=0))
    assert candidates.others == (SLIDING_FLASH_ATTENTION, FULL_FLEX_ATTENTION)
    assert candidates.left_out == ((FULL_FLASHINFER, why),)


def test_hopper_and_blackwell_have_no_candidates(tmp_path: Path, kernels: None) -> None:
    e2b = _model(tmp_path)
    for capability in ((9, 0), (10, 0)):
        assert attention_candidates(capability, e2b).others == ()
    assert attention_candidates((9, 0), e2b, fa4_available=False).others != ()


@pytest.mark.parametrize(
    ("versions", "env", "missing"),
    [
        ({}, "", "flashinfer-python is not installed"),
        (
            {"flashinfer-python": "0.6.18.post1"},
            "",
            "flashinfer-cubin not installed, flashinfer-jit-cache not",
        ),
        ({"flashinfer-python": "0.6.18.post1", "flashinfer-jit-cache": "0.6.18.post1"}, "1", ""),
        (
            {"flashinfer-python": "0.6.18", "flashinfer-cubin": "0.6.18", "flashinfer-jit-cache": "0.6.17"},
            "",
            "flashinfer-jit-cache 0.6.17",
        ),
        (
            {"flashinfer-python": "0.6.18", "flashinfer-cubin": "0.6.18", "flashinfer-jit-cache": "0.6.18"},
            "",
            "",
        ),
    ],
)
def test_flashinfer_kernels_follow_vllms_own_rule(
    monkeypatch: pytest.MonkeyPatch, versions: dict[str, str], env: str, missing: str
) -> None:
    """Each kernel package at flashinfer-python's version; ``VLLM_HAS_FLASHINFER_CUBIN=1`` excuses
    the cubins, as in vLLM's ``warn_if_flashinfer_kernels_missing``."""
    monkeypatch.setattr(flashinfer_kernels, "installed_version", versions.get)
    monkeypatch.setenv(flashinfer_kernels.CUBIN_ENV, env)
    said = flashinfer_kernels.flashinfer_kernels_missing()
    assert missing in said if missing else said == "", said
    if "precompiled" in said:
        assert "`vllm download-kernels`" in said and "compile or download them at start" in said


def test_the_labels_are_vllms_selector_per_card(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ampere and Ada: Triton (vLLM's Gemma 4 rule); Hopper: FlashAttention 4; B200 (10.0):
    FlashInfer, first in vLLM's priority there, with what this environment lacks for it."""
    assert vllm_attention((8, 6)) == vllm_attention((8, 9)) == "TRITON_ATTN"
    assert vllm_attention((9, 0)) == "FLASH_ATTN"
    assert vllm_attention((10, 0)) == "FLASHINFER"
    assert vllm_attention((10, 0), fa4_available=False) == "TRITON_ATTN"
    monkeypatch.setattr(gpu_attention, "installed_version", lambda name: "0.6.18")
    monkeypatch.setattr(gpu_attention, "flashinfer_kernels_missing", lambda: "")
    assert expected_attention((10, 0)) == (
        "FLASHINFER (all layers: first in vLLM's priority on 10.x, before FlashAttention 4)"
    )
    assert expected_attention((9, 0)).startswith("FLASH_ATTN (FlashAttention 4, all layers")
    monkeypatch.setattr(gpu_attention, "installed_version", lambda name: None)
    assert "no flashinfer-python, where vLLM takes FlashAttention 4" in expected_attention((10, 0))


def test_the_priority_table_is_vllms_own() -> None:
    """``VLLM_PRIORITY`` against vLLM's ``_get_backend_priorities``, called in a subprocess with the
    one compiled module its import needs stubbed (the CPU build lacks it; the function is pure)."""
    code = (
        "import json, sys, types\n"
        "sys.modules['vllm._C_stable_libtorch'] = types.ModuleType('vllm._C_stable_libtorch')\n"
        "from vllm.platforms.cuda import _get_backend_priorities\n"
        "from vllm.platforms.interface import DeviceCapability\n"
        "caps = [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]\n"
        "order = lambda a, b: [e.name for e in _get_backend_priorities(False, DeviceCapability(a, b))]\n"
        "print(json.dumps({f'{a}.{b}': order(a, b) for a, b in caps}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    vllms = json.loads(done.stdout.strip().splitlines()[-1])
    for card, order in vllms.items():
        major = int(card.split(".")[0])
        assert list(VLLM_PRIORITY.get(major, VLLM_PRIORITY[None])) == order, card


def test_paths_for_an_a10_says_flex_attention_is_left_out_for_e2b(tmp_path: Path) -> None:
    """``gemma-chat paths --gpu-memory 24 --gpu-capability 8.6`` on an E2B-shaped folder."""
    e2b = make_e2b_folder(tmp_path / "models")
    shown = _paths(e2b, tmp_path / "home", "--gpu-memory", "24", "--gpu-capability", "8.6")
    attention = [line.strip() for line in shown.splitlines() if "attention" in line and "FLEX" in line]
    assert attention == [
        "left out: full_attention on FLEX_ATTENTION — FlexAttention cannot start this model's 4 KV-shared "
        f"full layers (vLLM 0.32: {SHARING_NOT_SUPPORTED})"
    ], shown
    assert "also measures sliding_window on FLASH_ATTN" in shown


def test_a_b200_without_flashinfers_kernels_is_refused_with_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 66: on this machine's B200 vLLM runs every layer on FlashInfer; without its
    precompiled kernels the plan refuses, naming the packages at flashinfer-python's version. With
    them, in exact mode (Triton everywhere), or for a described card, it goes ahead."""
    from backend.config.settings import EngineSettings
    from backend.engine.gpu.card import GpuFacts, GpuRefused
    from backend.engine.model.footprint import GIB
    from backend.engine.model.source import resolve
    from backend.engine.paths.placement import plan_for

    source = resolve(str(make_e2b_folder(tmp_path)))
    b200 = GpuFacts("NVIDIA B200", 179 * GIB, 179 * GIB, (10, 0))
    monkeypatch.setattr("backend.engine.gpu.card.detect_gpu", lambda: b200)
    monkeypatch.setattr("backend.engine.paths.placement.detect_gpu", lambda: b200)
    monkeypatch.setattr(
        "vllm.platforms.current_platform.is_sleep_mode_available", lambda: True, raising=False
    )
    monkeypatch.setattr(gpu_attention, "installed_version", lambda name: "0.6.18")
    monkeypatch.setattr(gpu_attention, "flashinfer_kernels_missing", lambda: "flashinfer-cubin not installed")
    with pytest.raises(GpuRefused) as refused:
        plan_for(source, EngineSettings())
    assert "On NVIDIA B200 vLLM runs every Gemma 4 layer on FlashInfer" in str(refused.value)
    assert "flashinfer-cubin==0.6.18 flashinfer-jit-cache==0.6.18" in str(refused.value)
    assert "`vllm download-kernels`" in str(refused.value)
    assert plan_for(source, EngineSettings(exact=True)) is not None
    assert plan_for(
        source, EngineSettings(), GpuFacts("B200", b200.total_bytes, b200.free_bytes, (10, 0), True)
    )
    monkeypatch.setattr(gpu_attention, "flashinfer_kernels_missing", lambda: "")
    assert plan_for(source, EngineSettings()) is not None
