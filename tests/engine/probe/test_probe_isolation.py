"""``paths --measure`` survives a candidate that fails (issue 43, item 5): the failure is said and
skipped, the others are measured and chosen from, and the speculation result is kept before the
attention candidates run. On a GPU in fast mode a candidate whose tokens differ is checked again in
exact mode, and kept eligible where batch-invariant kernels remove the difference (item 1); the
attention stage and drafts by load are re-checked the same way, and exact mode measures no other
attention (issue 57, item 5). The candidates' engines are stand-ins (the real engine's probe is
tested in ``test_speculation.py``); the candidates, the rule and the stored file are the app's own."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from backend.checkpoints import GeneratedCheckpoint
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.probe import probe
from backend.engine.speculation.choice import choice_key
from backend.engine.speculation.kept import stored_choice
from backend.errors import EngineStartFailed

RATES = {("none", 0): 100.0, ("mtp", 1): 130.0, ("mtp", 2): 180.0, ("mtp", 3): 150.0, ("ngram", 4): 90.0}


class StandIn:
    async def shutdown(self) -> None:
        return None


def _stand_ins(
    monkeypatch: pytest.MonkeyPatch,
    failing: set[tuple[str, int, str]],
    differing: dict[tuple[str, int], str] | dict[tuple[str, int, str], str] | None = None,
    loaded: list[Any] | None = None,
) -> list[str]:
    """Engines that start and answer with ``RATES`` unless (method, drafts, attention) is failing;
    ``differing`` gives candidates other tokens — keyed (method, drafts) without attention, or
    (method, drafts, attention JSON) — in ``"fast"`` mode only, or ``"always"``. ``loaded``
    collects the exact config drafts by load was given (None where it was to compare as measured)."""
    started: list[str] = []
    table: dict[Any, str] = dict(differing or {})

    async def start(candidate: Any, log_dir: Path, warm_up: Any) -> StandIn:
        started.append(candidate.label)
        if (candidate.method, candidate.drafts, candidate.attention) in failing:
            raise EngineStartFailed(f"The {candidate.label} engine did not start.", "See its log.")
        candidate.engine = StandIn()
        return candidate.engine

    async def decode(candidate: Any, engine: Any, request: Any, round_: int) -> None:
        exact = "VLLM_BATCH_INVARIANT" in candidate.config.env
        key = (candidate.method, candidate.drafts)
        how = table.get((*key, candidate.attention)) or (None if candidate.attention else table.get(key))
        differs = how == "always" or (how == "fast" and not exact)
        candidate.outputs[request.request_id] = (1, 2, 4) if differs else (1, 2, 3)
        faster = 1.2 if candidate.attention else 1.0
        rate = RATES[(candidate.method, candidate.drafts)] * faster
        candidate.rates.setdefault(request.request_id, []).append(rate)

    monkeypatch.setattr(probe, "_start", start)
    monkeypatch.setattr(probe, "_decode", decode)
    monkeypatch.setattr(probe, "room_for_another", lambda footprint: (True, 1 << 40))

    async def no_pause(seconds: float | None = None) -> None:
        return None

    monkeypatch.setattr(probe, "settle", no_pause)  # stand-ins load no core

    async def by_load(source: Any, config: Any, choice: Any, levels: Any, *rest: Any, exact: Any) -> Any:
        started.append(f"by load {choice.method}@{choice.drafts} {list(levels)}")
        if loaded is not None:
            loaded.append(exact)
        if ("by load", 0, "") in failing:
            raise EngineStartFailed("The by-load engine did not start.", "See its log.")
        return replace(choice, by_load=((4, choice.drafts),))

    monkeypatch.setattr(probe, "with_drafts_by_load", by_load)
    return started


@pytest.fixture
def source(tiny: GeneratedCheckpoint) -> ModelSource:
    return ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")


SETTINGS = EngineSettings(dtype="float32", max_model_len=1024)


async def test_a_candidate_that_fails_to_start_is_skipped_and_the_rest_decide(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _stand_ins(monkeypatch, {("mtp", 2, "")})
    said: list[str] = []
    kwargs: dict[str, Any] = {"drafts": (1, 2, 3), "prompts": 3, "rounds": 1, "attention": []}
    choice = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert "mtp@2" in started, "it was tried"
    assert any("failed, skipped" in line and "did not start" in line for line in said), said
    assert (choice.method, choice.drafts) == ("mtp", 3), "the fastest of those measured"
    assert [(run.method, run.drafts) for run in choice.runs] == [
        ("none", 0),
        ("mtp", 1),
        ("mtp", 3),
        ("ngram", 4),
    ]
    assert stored_choice(choice_key(source, SETTINGS, gpu=False)) == choice
    assert started[-1] == "by load mtp@3 [1, 2, 4, 8]", "drafts by load last, on the chosen count"
    assert choice.by_load == ((4, 3),)


async def test_drafts_by_load_failing_keeps_the_choice_for_one_request(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_ins(monkeypatch, {("by load", 0, "")})
    said: list[str] = []
    kwargs: dict[str, Any] = {"drafts": (1, 2), "prompts": 3, "rounds": 1, "attention": []}
    choice = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert (choice.method, choice.drafts, choice.by_load) == ("mtp", 2, None)
    assert any(line.startswith("drafts by load: failed, the estimated thresholds stay") for line in said)
    assert stored_choice(choice_key(source, SETTINGS, gpu=False)) == choice


async def test_the_speculation_result_is_kept_when_every_attention_candidate_fails(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_kind = {"backend_per_kind": {"sliding_window": "CPU_ATTN"}}
    _stand_ins(monkeypatch, {("mtp", 2, '{"backend_per_kind": {"sliding_window": "CPU_ATTN"}}')})
    said: list[str] = []
    kwargs: dict[str, Any] = {"drafts": (1, 2), "prompts": 3, "rounds": 1, "attention": [per_kind]}
    choice = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert (choice.method, choice.drafts, choice.attention) == ("mtp", 2, "")
    assert any("+ attention: failed, skipped" in line for line in said), said
    assert stored_choice(choice_key(source, SETTINGS, gpu=False)) == choice


async def test_without_a_reference_nothing_is_decided(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_ins(monkeypatch, {("none", 0, "")})
    with pytest.raises(probe.GemmaChatError, match="could not measure the engine without speculation"):
        await probe.measure_speculation(
            source, SETTINGS, gemma_home, lambda _: None, drafts=(1,), attention=[]
        )


async def test_on_a_gpu_a_difference_that_batch_invariance_removes_keeps_a_candidate(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _stand_ins(monkeypatch, set(), {("mtp", 2): "fast", ("mtp", 3): "always"})
    monkeypatch.setattr(probe, "on_gpu", lambda: True)
    monkeypatch.setattr(probe, "plan_for", lambda source, settings: None)  # the CPU's configs stand in
    said: list[str] = []
    kwargs: dict[str, Any] = {"drafts": (1, 2, 3), "prompts": 3, "rounds": 1, "attention": []}
    choice = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert any("parity in exact mode: mtp@2, mtp@3 and no speculation" in line for line in said), said
    assert started.count("none") == 2, "the reference ran again in exact mode"
    assert (choice.method, choice.drafts) == ("mtp", 2), "fastest, and its tokens agree in exact mode"
    runs = {run.label(): run for run in choice.runs}
    assert runs["mtp@2"].kernel_only == (0, 1, 2) and not runs["mtp@2"].diverged
    assert "fast mode only" in runs["mtp@2"].describe()
    assert runs["mtp@3"].diverged == (0, 1, 2), "still different under batch invariance: out"
    monkeypatch.setattr(probe, "on_gpu", lambda: False)
    again = _stand_ins(monkeypatch, set(), {("mtp", 2): "fast"})
    cpu = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert (cpu.method, cpu.drafts) == ("mtp", 3) and again.count("none") == 1, "off a GPU: no recheck"


FLASH = {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}
FLEX = {"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}}


def _on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The probe sees a GPU (its configs the CPU's: no memory plan); returns every config started."""
    monkeypatch.setattr(probe, "on_gpu", lambda: True)
    monkeypatch.setattr(probe, "plan_for", lambda source, settings: None)
    configs: list[Any] = []
    start = probe._start

    async def recording(candidate: Any, log_dir: Path, warm_up: Any) -> Any:
        configs.append(candidate.config)
        return await start(candidate, log_dir, warm_up)

    monkeypatch.setattr(probe, "_start", recording)
    return configs


async def test_on_a_gpu_the_attention_stage_decides_on_speed_among_the_same_tokens(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 66: the attention stage re-checks nothing in exact mode (its reference runs Triton,
    a candidate its own kernels: they would differ by the kernel alone, decided by luck). A
    candidate whose fast-mode tokens differ is out and said (maybe rounding alone: the probe
    cannot tell); one with the same tokens is judged on speed. FlexAttention's tokens differ in
    fast mode, FlashAttention's do not: both 1.2x as fast, Flex first (it would win a tie)."""
    flash, flex = json.dumps(FLASH, sort_keys=True), json.dumps(FLEX, sort_keys=True)
    loaded: list[Any] = []
    differing = {("mtp", 2, flex): "fast", ("mtp", 1): "fast"}
    started = _stand_ins(monkeypatch, set(), differing, loaded)
    configs = _on_a_gpu(monkeypatch)
    said: list[str] = []
    kwargs: dict[str, Any] = {"drafts": (1, 2), "prompts": 3, "rounds": 1, "attention": [FLEX, FLASH]}
    choice = await probe.measure_speculation(source, SETTINGS, gemma_home, said.append, **kwargs)
    assert (choice.method, choice.drafts, choice.attention) == ("mtp", 2, flash)
    assert started.count("none") == 2, "no speculation ran in exact mode once, for the speculation stage"
    assert not any("+ attention" in line and "again" in line for line in said), "no attention re-check"
    flex_said = "attention: mtp@2 + attention gave other greedy tokens than vLLM's attention"
    assert any(line.startswith(flex_said) and "not chosen" in line for line in said), said
    runs = {run.label(): run for run in choice.runs}
    assert not runs["mtp@2 + sliding_window on FLASH_ATTN"].diverged
    assert runs["mtp@2 + full_attention on FLEX_ATTENTION"].diverged == (0, 1, 2)
    rechecked = [c.args["attention_config"].value for c in configs if "VLLM_BATCH_INVARIANT" in c.env]
    assert {"backend": "TRITON_ATTN", **FLASH} not in rechecked, "no attention candidate in exact mode"
    (exact,) = loaded
    assert exact.env["VLLM_BATCH_INVARIANT"].value == 1, "drafts by load re-checks under the same kernels"
    assert exact.args["attention_config"].value == {"backend": "TRITON_ATTN", **FLASH}


async def test_exact_mode_measures_no_other_attention_and_rechecks_nothing(
    source: ModelSource, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both paths run Triton's batch-invariant kernels in exact mode (compare's line says so): a
    backend measured for the optimized path alone would break that, so none is measured."""
    import backend.engine.paths.engine_args

    loaded: list[Any] = []
    started = _stand_ins(monkeypatch, set(), {("mtp", 2): "always"}, loaded)
    _on_a_gpu(monkeypatch)
    monkeypatch.setattr(backend.engine.paths.engine_args, "on_gpu", lambda: True)
    said: list[str] = []
    exact = SETTINGS.model_copy(update={"exact": True})
    kwargs: dict[str, Any] = {"drafts": (1, 2), "prompts": 3, "rounds": 1, "attention": [FLASH]}
    choice = await probe.measure_speculation(source, exact, gemma_home, said.append, **kwargs)
    assert (choice.method, choice.drafts, choice.attention) == ("mtp", 1, "")
    assert not any("attention" in label for label in started), started
    assert any(line.startswith("attention: none measured in exact mode") for line in said), said
    assert started.count("none") == 1 and loaded == [None], "exact already: tokens decide as measured"
