"""Both paths' batch limits on a (described) GPU — what `vllm serve` uses on the card — and the
optimized path's draft schedule, read back through vLLM's own schedule expansion. The limits
against vLLM's own table and scheduler are in tests/engine/gpu/test_gpu_vllm_config.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backend.config.settings import EngineSettings
from backend.engine.gpu.card import described_gpu
from backend.engine.gpu.serve_limits import serve_limits
from backend.engine.model.source import resolve
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.paths.gpu_batch import FULL_DRAFTS_UP_TO, ONE_DRAFT_UP_TO, draft_schedule
from backend.engine.paths.placement import plan_for
from tests.engine.gpu.test_gpu_card import _paths
from tests.support.e2b_folder import make_e2b_folder


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


def _args(model: Path, gib: float, capability: tuple[int, int] = (8, 9)) -> tuple[dict, dict]:  # type: ignore[type-arg]
    source, settings = resolve(str(model)), EngineSettings()
    plan = plan_for(source, settings, described_gpu(gib, capability))
    baseline = engine_config(EnginePath.baseline(), source, settings, 1, plan).args
    optimized = engine_config(EnginePath.optimized(), source, settings, 1, plan).args
    return baseline, optimized


@pytest.mark.parametrize(
    ("gib", "capability", "limits"),
    [
        (16, (8, 9), (256, 2048)),
        (80, (8, 0), (256, 2048)),
        (80, (9, 0), (1024, 8192)),
        (180, (10, 0), (1024, 16384)),
    ],
)
def test_both_paths_batch_what_vllm_serve_uses_on_the_card(
    e2b: Path, gib: float, capability: tuple[int, int], limits: tuple[int, int]
) -> None:
    """vLLM's API-server table: an A100 stays on the small row whatever its memory (its name)."""
    for args in _args(e2b, gib, capability):
        assert (args["max_num_seqs"].value, args["max_num_batched_tokens"].value) == limits
        assert "what `vllm serve` uses on" in args["max_num_seqs"].reason
        assert "an engine in a process would get 128 and 2,048" in args["max_num_batched_tokens"].reason


def test_the_table_reads_memory_and_name_as_vllm_does() -> None:
    from backend.engine.gpu.card import GpuFacts
    from backend.engine.model.footprint import GIB

    def card(name: str, gib: float) -> tuple[int, int]:
        limits = serve_limits(GpuFacts(name, int(gib * GIB), int(gib * GIB), (9, 0)))
        return limits.max_num_seqs, limits.max_num_batched_tokens

    assert card("NVIDIA A100-SXM4-80GB", 80) == (256, 2048), "vLLM PR 17885: a bigger step was slower"
    assert card("NVIDIA H100 80GB HBM3", 79.2) == (1024, 8192)
    assert card("NVIDIA H100 80GB HBM3", 69.9) == (256, 2048)
    assert card("NVIDIA B200", 160) == (1024, 16384)


@pytest.mark.parametrize("gib", [80, 24, 16])
def test_drafts_fall_as_requests_rise_as_vllm_reads_the_schedule(e2b: Path, gib: float) -> None:
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    _, optimized = _args(e2b, gib)
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


def test_paths_prints_the_batch_limits_with_their_reason(e2b: Path, tmp_path: Path) -> None:
    shown = _paths(e2b, tmp_path, "--gpu-memory", "16")
    assert "max_num_seqs = 256" in shown and "what `vllm serve` uses on" in shown, shown
    assert "max_num_batched_tokens = 2048" in shown, shown
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
    assert levels == (1, 8, 64, 256, 512)
    source, settings = resolve(str(e2b)), EngineSettings()
    said: list[str] = []
    for gib, kept in ((80, (1, 8, 64, 256, 512)), (16, (1, 8, 64, 256))):
        plan = plan_for(source, settings, described_gpu(gib, (8, 9)))
        paths = (EnginePath.baseline(), EnginePath.optimized())
        configs = {p.name: engine_config(p, source, settings, 1, plan) for p in paths}
        options = BenchOptions(workloads=with_levels(WORKLOAD_NAMES, levels), requests=levels[0])
        planned = within_batch_limits(options, configs, lambda stage, *_: said.append(stage))
        assert planned.workloads == (*(f"throughput@{n}" for n in kept), "single", "chat", "media"), gib
    assert said == ["throughput at 512 at once skipped: above the plan's batch limit 256"]


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
    optimized = engine_config(EnginePath.optimized(), source, settings, 1, plan)
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
