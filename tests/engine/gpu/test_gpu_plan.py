"""The GPU path without a GPU: the memory plan, the refusals, the drafter found where users keep
it, the compare line and bench's schedule on a described card. vLLM's own config classes judging
the app's arguments on a faked CUDA platform are in ``tests/engine/gpu/test_gpu_vllm_config.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backend.config.settings import EngineSettings
from backend.engine.gpu.card import GpuRefused, described_gpu
from backend.engine.model.footprint import GIB
from backend.engine.model.source import resolve
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.paths.placement import plan_for
from backend.errors import NotACheckpoint
from tests.support.e2b_folder import make_e2b_folder

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def e2b_alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("lonely"), assistant=False)


def _plan(model: Path, gib: float, capability: tuple[int, int] = (8, 9), **settings: Any) -> Any:
    source = resolve(str(model))
    return plan_for(source, EngineSettings(**settings), described_gpu(gib, capability))


# -- the plan ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gib", "mode"), [(16, "swap"), (24, "swap"), (48, "side-by-side"), (80, "side-by-side")]
)
def test_plan_for_common_cards(e2b: Path, gib: int, mode: str) -> None:
    plan = _plan(e2b, gib)
    assert plan.mode == mode
    if mode == "swap":  # one engine alone: the whole setting (not half of it, as before)
        assert plan.shares == {"baseline": 0.85, "optimized": 0.85}
        assert plan.sleep_mode
    else:
        assert sum(plan.shares.values()) <= 0.85 + 1e-9
        for name, footprint in plan.footprints.items():
            assert plan.shares[name] * gib * GIB >= footprint.total
    assert plan.footprints["optimized"].drafter is not None  # the sibling assistant counts


def test_a_card_too_small_is_refused_with_both_numbers(e2b: Path) -> None:
    with pytest.raises(GpuRefused) as refused:
        _plan(e2b, 12)
    text = str(refused.value)
    assert "needs 12.2 GiB" in text and "gives it 10.2 GiB" in text and "at least 15 GiB" in text


def test_pre_ampere_and_float16_are_refused_naming_the_card(e2b: Path) -> None:
    with pytest.raises(GpuRefused, match=r"T4.*compute capability 7\.5.*float16"):
        _plan(e2b, 16, (7, 5))
    with pytest.raises(GpuRefused, match=r"float16 on .*L4"):
        _plan(e2b, 24, dtype="float16")


def test_swap_can_be_forced_and_free_memory_caps_the_budget(e2b: Path) -> None:
    assert _plan(e2b, 80, both_paths="swap").mode == "swap"
    source = resolve(str(e2b))
    busy = described_gpu(80)
    busy = type(busy)(
        busy.name, busy.total_bytes, 20 * GIB, busy.capability, True
    )  # 20 GiB free: other processes hold the rest
    plan = plan_for(source, EngineSettings(), busy)
    assert plan.mode == "swap" and plan.budget_bytes < 20 * GIB
    assert any("free" in note for note in plan.notes)


def test_arguments_carry_the_plan(e2b: Path) -> None:
    source = resolve(str(e2b))
    plan = plan_for(source, EngineSettings(exact=True), described_gpu(24))
    config = engine_config(EnginePath.optimized(), source, EngineSettings(exact=True), 1, plan)
    args = config.engine_kwargs()
    assert args["gpu_memory_utilization"] == 0.85 and args["enable_sleep_mode"] is True
    assert args["speculative_config"]["model"].endswith("gemma-4-E2B-it-assistant")
    assert config.env_values()["VLLM_BATCH_INVARIANT"] == "1"


def test_exact_is_refused_on_the_cpu(e2b: Path) -> None:
    with pytest.raises(GpuRefused, match="exact = true needs a GPU"):
        engine_config(EnginePath.baseline(), resolve(str(e2b)), EngineSettings(exact=True))


# -- the drafter ---------------------------------------------------------------------------------


def test_drafter_found_beside_inside_and_given(e2b: Path, e2b_alone: Path, tmp_path: Path) -> None:
    beside = resolve(str(e2b))
    assert beside.drafter == e2b.parent / "gemma-4-E2B-it-assistant"
    assert "beside" in beside.drafter_note
    inside = make_e2b_folder(tmp_path)
    (tmp_path / "gemma-4-E2B-it-assistant").rename(inside / "assistant")
    assert resolve(str(inside)).drafter == inside / "assistant"
    given = resolve(str(e2b_alone), drafter=str(beside.drafter))
    assert given.drafter == beside.drafter
    with pytest.raises(NotACheckpoint, match="not a Gemma 4 assistant"):
        resolve(str(e2b_alone), drafter=str(e2b))
    none = resolve(str(e2b_alone))
    assert none.drafter is None and "no MTP drafter found" in none.drafter_note


def test_no_drafter_on_a_gpu_means_no_speculation_not_ngram(e2b_alone: Path) -> None:
    source = resolve(str(e2b_alone))
    plan = plan_for(source, EngineSettings(), described_gpu(24))
    config = engine_config(EnginePath.optimized(), source, EngineSettings(), 1, plan)
    assert "speculative_config" not in config.args
    assert any("no MTP drafter found" in note and "ngram is not" in note for note in config.notes)
    forced = engine_config(EnginePath.optimized(), source, EngineSettings(speculation="ngram"), 1, plan)
    assert forced.engine_kwargs()["speculative_config"]["method"] == "ngram"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "paths", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_paths_on_a_local_folder_with_a_sibling_assistant_shows_mtp(e2b: Path, e2b_alone: Path) -> None:
    shown = _cli("--model", str(e2b), "--gpu-memory", "24")
    assert shown.returncode == 0, shown.stderr
    assert "plan: swap" in shown.stdout and "gpu_memory_utilization = 0.85" in shown.stdout
    assert "speculative_config = {'model': '" + str(e2b.parent / "gemma-4-E2B-it-assistant") in shown.stdout
    assert "'method': 'ngram'" not in shown.stdout
    assert "also measures sliding_window on FLASH_ATTN" in shown.stdout, "a Triton card (8.9)"
    alone = _cli("--model", str(e2b_alone), "--gpu-memory", "80", "--gpu-capability", "9.0")
    assert "plan: side by side" in alone.stdout and "FlashAttention 4" in alone.stdout
    assert "no MTP drafter found" in alone.stdout and "'method': 'ngram'" not in alone.stdout
    assert "also measures" not in alone.stdout, "FlashAttention 4 on every layer already"
    refused = _cli("--model", str(e2b), "--gpu-memory", "12")
    assert refused.returncode == 2 and "gives it 10.2 GiB" in refused.stderr


def test_the_compare_line_says_which_kernels_a_gpu_ran() -> None:
    from backend.chat.compare import CompareResult, kernel_mode
    from backend.engine.metrics import TurnMetrics
    from backend.engine.parity import compare_tokens
    from backend.engine.protocol import EngineInfo, Finished

    def info(env: dict[str, str], gpu: bool = True) -> EngineInfo:
        args = {"gpu_memory_utilization": 0.85} if gpu else {}
        return EngineInfo("m", 4096, frozenset({"text"}), args, env)

    exact = {"VLLM_BATCH_INVARIANT": "1"}
    assert kernel_mode(info(exact), info(exact)).startswith("exact mode")
    assert kernel_mode(info({}), info({})).startswith("fast mode") and "exact = true" in kernel_mode(
        info({}), info({})
    )
    assert kernel_mode(info({}, gpu=False), info({}, gpu=False)) == ""
    done = Finished("r", "hi", (1, 2), TurnMetrics(), "stop")
    result = CompareResult(
        done, done, compare_tokens((1, 2), (1, 2), str), (), kernel_mode(info(exact), info(exact))
    )
    from backend.chat.verdict import Verdict

    assert Verdict(result).summary().endswith("exact mode (batch-invariant kernels on both paths)")


@pytest.mark.parametrize(("gib", "together"), [(24, False), (80, True)])
async def test_bench_on_a_gpu_follows_the_plan(
    e2b: Path, gib: int, together: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench's engines get the plan's shares (adding up to at most the setting side by side, the
    whole setting each one after the other) and its schedule says which."""
    from backend.bench import session
    from backend.bench.options import BenchOptions
    from backend.config.settings import Settings
    from tests.support.fake_engine import FakeEngine

    source = resolve(str(e2b))
    plan = plan_for(source, EngineSettings(), described_gpu(gib))
    configs = session.path_configs(source, Settings(), BenchOptions(), plan)
    shares = [c.engine_kwargs()["gpu_memory_utilization"] for c in configs.values()]
    assert (sum(shares) <= 0.85 + 1e-9) if together else shares == [0.85, 0.85]
    up: list[str] = []

    async def start(path: str, *args: Any) -> FakeEngine:
        up.append(path)
        return FakeEngine(path)

    async def nothing(*args: Any) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(session, "_start", start)
    monkeypatch.setattr(session, "warm_up", nothing)
    monkeypatch.setattr(session, "run_interleaved", nothing)
    monkeypatch.setattr(session, "room_for_another", lambda footprint: (True, 64 * GIB))  # host RAM: plenty
    _, schedule = await session.measure_paths(source, configs, BenchOptions(), None, print, None, None, plan)  # type: ignore[arg-type]
    assert ("side by side" in schedule) is together
    assert ("one path after the other: the GPU holds one engine" in schedule) is not together


# -- every start passes vLLM's own free-memory check -------------------------------------------


def _starts_pass_vllms_check(plan: Any, free: int) -> list[str]:
    """Each start of the plan judged by vLLM's ``request_memory`` (share × total against what is
    free once the starting worker's context is open): side by side, both engines one after the
    other; swapping, the second beside the first one's residue (asleep) or nothing (stopped)."""
    from types import SimpleNamespace

    from vllm.v1.worker.utils import request_memory

    from backend.engine.gpu.memory_plan import CONTEXT_BYTES, SLEEP_RESIDUE_BYTES

    total, held, started = plan.gpu.total_bytes, 0, []
    for name in ("baseline", "optimized"):
        snapshot = SimpleNamespace(total_memory=total, free_memory=free - held - CONTEXT_BYTES, device_=0)
        taken = request_memory(snapshot, SimpleNamespace(gpu_memory_utilization=plan.shares[name]))
        started.append(name)
        if plan.mode == "side-by-side":
            held += taken + CONTEXT_BYTES
        elif plan.sleep_mode:
            held = SLEEP_RESIDUE_BYTES
    return started


@pytest.mark.parametrize(
    ("gib", "used_gib"), [(24, 2.5), (24, 0.0), (16, 1.0), (48, 3.0), (80, 10.0), (80, 0.0)]
)
def test_a_card_partly_used_by_other_programs_starts_both_paths(e2b: Path, gib: int, used_gib: float) -> None:
    """Issue 57: on a 24 GB desktop card with ~2.5 GiB used by other programs the plan gave both
    swapped engines 0.85 of the card, and vLLM refused the second start (free memory less the
    sleeping engine's residue and the new context is below the share)."""
    card = described_gpu(gib)
    card = type(card)(
        card.name, card.total_bytes, card.total_bytes - int(used_gib * GIB), card.capability, True
    )
    plan = plan_for(resolve(str(e2b)), EngineSettings(), card)
    assert _starts_pass_vllms_check(plan, card.free_bytes) == ["baseline", "optimized"], plan.lines()
    for name, footprint in plan.footprints.items():
        assert plan.shares[name] * card.total_bytes >= footprint.total, "each engine still fits its need"


def test_exact_mode_applies_no_measured_attention(e2b: Path, gemma_home: Path) -> None:
    """A choice stored with an attention backend (fast mode's) is not applied in exact mode: both
    paths keep Triton's batch-invariant kernels, which compare's line promises."""
    import json

    from backend.engine.speculation.choice import ProbeRun, SpeculationChoice, choice_key
    from backend.engine.speculation.kept import forget_choice, store_choice

    source = resolve(str(e2b))
    sliding = {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}
    for exact, expected in ((False, {**sliding}), (True, {"backend": "TRITON_ATTN"})):
        settings = EngineSettings(exact=exact)
        plan = plan_for(source, settings, described_gpu(24, (8, 6)))
        choice = SpeculationChoice(
            "mtp", 2, 1.6, 1.4, 1.8, (ProbeRun("none", 0, (100.0,)),), json.dumps(sliding), 1.1
        )
        store_choice(key := choice_key(source, settings, True), choice)
        try:
            config = engine_config(EnginePath.optimized(), source, settings, 1, plan)
        finally:
            forget_choice(key)  # the folder is the module's: other tests start from nothing kept
        assert config.args["attention_config"].value == expected, exact
