"""The optimized path's batch limits and draft schedule on a (described) GPU: sized from the
memory plan, read back through vLLM's own schedule expansion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backend.config.settings import EngineSettings
from backend.engine.gpu.card import described_gpu
from backend.engine.gpu.window import kv_room
from backend.engine.model.footprint import kv_bytes_per_request
from backend.engine.model.source import resolve
from backend.engine.paths.gpu_batch import (
    BATCHED_TOKENS,
    FULL_DRAFTS_UP_TO,
    MOST_SEQS,
    ONE_DRAFT_UP_TO,
    PAGE_MARGIN,
    TYPICAL_TOKENS,
    draft_schedule,
)
from backend.engine.paths.placement import plan_for
from backend.engine.paths.profiles import EngineProfile, engine_config
from tests.e2b_folder import make_e2b_folder
from tests.test_gpu_card import _profiles


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


def _args(model: Path, gib: float, capability: tuple[int, int] = (8, 9)) -> tuple[dict, dict, int]:  # type: ignore[type-arg]
    source, settings = resolve(str(model)), EngineSettings()
    plan = plan_for(source, settings, described_gpu(gib, capability))
    baseline = engine_config(EngineProfile.baseline(), source, settings, 1, plan).args
    optimized = engine_config(EngineProfile.optimized(), source, settings, 1, plan).args
    return baseline, optimized, kv_room(plan, "optimized")


def test_a_large_card_batches_the_most_and_the_baseline_stays_stock(e2b: Path) -> None:
    baseline, optimized, _ = _args(e2b, 80, (9, 0))
    assert "max_num_seqs" not in baseline and "max_num_batched_tokens" not in baseline
    assert optimized["max_num_seqs"].value == MOST_SEQS
    assert optimized["max_num_batched_tokens"].value == BATCHED_TOKENS
    assert "vLLM's default is 128" in optimized["max_num_seqs"].reason


def test_a_small_card_batches_what_its_kv_room_holds(e2b: Path) -> None:
    _, optimized, room = _args(e2b, 16)
    each = PAGE_MARGIN * kv_bytes_per_request(e2b, TYPICAL_TOKENS).bytes
    seqs = optimized["max_num_seqs"].value
    assert seqs == room // each < MOST_SEQS, optimized["max_num_seqs"].reason
    assert f"holds {seqs} requests of {TYPICAL_TOKENS} tokens" in optimized["max_num_seqs"].reason


@pytest.mark.parametrize("gib", [80, 24, 16])
def test_drafts_fall_as_requests_rise_as_vllm_reads_the_schedule(e2b: Path, gib: float) -> None:
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    _, optimized, _ = _args(e2b, gib)
    spec, seqs = optimized["speculative_config"].value, optimized["max_num_seqs"].value
    drafts = spec["num_speculative_tokens"]
    lookup = build_dynamic_sd_schedule_lookup(spec["num_speculative_tokens_per_batch_size"], seqs, drafts)
    assert len(lookup) == seqs + 1
    for running in range(1, seqs + 1):
        expected = drafts if running <= FULL_DRAFTS_UP_TO else (1 if running <= ONE_DRAFT_UP_TO else 0)
        assert lookup[running] == expected, (running, lookup)
    assert "thresholds estimated" in optimized["speculative_config"].reason


def test_the_schedule_ends_where_the_batch_does() -> None:
    assert draft_schedule(3, 26) == [[1, 16, 3], [17, 26, 1]]
    assert draft_schedule(1, 10) == [[1, 10, 1]]
    assert draft_schedule(2, 256)[-1] == [ONE_DRAFT_UP_TO + 1, 256, 0]


def test_profiles_prints_the_batch_limits_with_their_arithmetic(e2b: Path, tmp_path: Path) -> None:
    shown = _profiles(e2b, tmp_path, "--gpu-memory", "16")
    assert "max_num_seqs = " in shown and "GiB of KV room holds" in shown, shown
    assert f"max_num_batched_tokens = {BATCHED_TOKENS}" in shown, shown
    assert "num_speculative_tokens_per_batch_size" in shown, shown


def test_bench_on_a_gpu_plans_the_seeds_table_within_the_batch_limit(
    e2b: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.bench.options import (
        WORKLOAD_NAMES,
        BenchOptions,
        default_requests,
        with_levels,
        within_batch_limits,
    )

    monkeypatch.setattr("backend.engine.platform.on_gpu", lambda: True)
    levels = default_requests()
    assert levels == (1, 8, 64, 256)
    source, settings = resolve(str(e2b)), EngineSettings()
    said: list[str] = []
    for gib, kept in ((80, (1, 8, 64, 256)), (16, (1, 8))):
        plan = plan_for(source, settings, described_gpu(gib, (8, 9)))
        paths = (EngineProfile.baseline(), EngineProfile.optimized())
        configs = {p.name: engine_config(p, source, settings, 1, plan) for p in paths}
        options = BenchOptions(workloads=with_levels(WORKLOAD_NAMES, levels), requests=levels[0])
        planned = within_batch_limits(options, configs, lambda stage, *_: said.append(stage))
        assert planned.workloads == (*(f"throughput@{n}" for n in kept), "single", "chat", "media"), gib
    assert said == ["throughput at 64, 256 at once skipped: above the plan's batch limit 26"]


async def test_bench_on_an_a100_gives_each_other_attention_backend_its_rows(
    e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a Triton card bench runs the optimized path again with each other backend for Gemma 4's
    head sizes, alone after the table; one that fails is said and skipped; the report's rows set
    each against the optimized path on vLLM's attention, with parity against the baseline. The
    engines are stand-ins (the runs' own code is bench's, tested on real engines in test_bench.py)."""
    from backend.bench import variants
    from backend.bench.options import BenchOptions
    from backend.bench.report import _parity_over
    from backend.bench.workload_runs import RequestResult, WorkloadRun
    from backend.engine.metrics import TurnMetrics
    from backend.errors import EngineStartFailed

    a100 = described_gpu(80, (8, 0))
    monkeypatch.setattr("backend.engine.gpu.card.detect_gpu", lambda: a100)
    source, settings = resolve(str(e2b)), EngineSettings()
    plan = plan_for(source, settings, a100)
    monkeypatch.setattr("backend.engine.gpu.attention.flashinfer_kernels_missing", lambda: "")
    tried = variants.card_variants(source, plan, exact=False)
    assert len(tried) == 2 and variants.card_variants(source, plan, exact=True) == ()
    assert not any("FLEX" in variant for variant in tried), "FlexAttention refuses E2B's KV-shared layers"
    tried += (json.dumps({"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}}),)  # as options.attention
    optimized = engine_config(EngineProfile.optimized(), source, settings, 1, plan)
    configs = variants.variant_configs(optimized, tried)
    assert list(configs) == [
        "optimized+sliding_window on FLASH_ATTN",
        "optimized+full_attention on FLASHINFER",
        "optimized+full_attention on FLEX_ATTENTION",
    ]
    flex = configs["optimized+full_attention on FLEX_ATTENTION"].args["attention_config"].value
    assert flex == {"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}}

    def run(path: str, rate: float, tokens: tuple[int, ...] = (1, 2, 3)) -> WorkloadRun:
        done = RequestResult("q0", tokens, TurnMetrics(generated_tokens=3, decode_tokens_per_s=rate))
        return WorkloadRun("single", path, (done,), 1.0)

    class Stand:
        def __init__(self, source: object, config: Any, log_path: object) -> None:
            self.attention = json.dumps(config.args["attention_config"].value, sort_keys=True)

        async def start(self) -> None:
            if "FLASHINFER" in self.attention:
                raise EngineStartFailed("FlashInfer has no kernel for this layer.", "See its log.")

        async def shutdown(self) -> None:
            return None

    async def interleaved(
        engines: dict[str, Stand], *args: object
    ) -> dict[str, dict[str, list[WorkloadRun]]]:
        (name,) = engines
        tokens = (1, 2, 4) if "FLEX" in name else (1, 2, 3)
        return {name: {"single": [run(name, 120.0, tokens), run(name, 130.0, tokens)]}}

    async def nothing(*args: object) -> None:
        return None

    monkeypatch.setattr("backend.engine.local.vllm.VllmEngine", Stand)
    said: list[str] = []
    options = BenchOptions(workloads=("single",), repetitions=2)
    runs, failed = await variants.measure_variants(
        source,
        configs,
        options,
        None,  # type: ignore[arg-type]
        lambda stage, *_: said.append(stage),
        gemma_home,
        nothing,
        interleaved,  # type: ignore[arg-type]
    )
    assert set(failed) == {"optimized+full_attention on FLASHINFER"} and len(runs) == 2
    assert any("FLASHINFER: failed, skipped — FlashInfer has no kernel" in line for line in said), said
    main = {
        "baseline": {"single": [run("b", 90.0), run("b", 95.0)]},
        "optimized": {"single": [run("o", 100.0), run("o", 100.0)]},
    }
    rows = variants.variant_rows({**main, **runs}, failed, options, _parity_over)
    by_name = {row.name: row for row in rows}
    sliding = by_name["optimized+sliding_window on FLASH_ATTN"]
    assert sliding.rows[0].ratio == pytest.approx(1.25) and sliding.parity["single"].identical_requests == 2
    assert by_name["optimized+full_attention on FLEX_ATTENTION"].parity["single"].identical_requests == 0
    table = "\n".join(variants.variants_markdown(rows))
    assert "| full_attention on FLASHINFER | — | failed: FlashInfer has no kernel for this layer." in table
    assert "| sliding_window on FLASH_ATTN | single |" in table and "| 1.25x | 2/2 |" in table
