"""Under load the bench's parity reference is the baseline's tokens for each request alone: stock
vLLM's batched tokens depend on the batch, the optimized path's (row-exact ``all``) do not."""

from __future__ import annotations

import json
from pathlib import Path

from backend.bench.alone import alone_name, batched, run_alone
from backend.bench.model_costs import model_costs
from backend.bench.options import BenchOptions
from backend.bench.report import BenchReport, PathRun
from backend.bench.workload_runs import RequestResult, WorkloadRun
from backend.bench.workloads import load_workloads
from backend.config.settings import Settings
from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource
from tests.bench.test_bench import ROOFS
from tests.support.fake_engine import FakeEngine


def _batch(path: str, tokens: dict[str, tuple[int, ...]], workload: str = "throughput") -> WorkloadRun:
    metrics = TurnMetrics(generated_tokens=4, decode_tokens_per_s=10.0, ttft_s=0.01)
    return WorkloadRun(workload, path, tuple(RequestResult(i, t, metrics) for i, t in tokens.items()), 1.0)


def test_batched_parity_is_taken_against_the_baseline_alone(tiny_source: ModelSource) -> None:
    options = BenchOptions(workloads=("throughput",), repetitions=2, peer=False)
    assert batched(options) == ["throughput"] and alone_name("throughput") == "throughput alone"
    alone = {"a": (1, 2, 3, 4), "b": (5, 6, 7, 8)}
    batched_baseline = {"a": (1, 2, 9, 9), "b": (5, 6, 7, 8)}  # its batch moved request a
    baseline = PathRun(
        "baseline",
        {
            "throughput": [_batch("baseline", batched_baseline)] * 2,
            "throughput alone": [_batch("baseline", alone, "throughput alone")],
        },
        {},
        {},
    )
    optimized = PathRun("optimized", {"throughput": [_batch("optimized", alone)] * 2}, {}, {})
    config = json.loads((tiny_source.path / "config.json").read_text())
    report = BenchReport.build(
        tiny_source,
        Settings(),
        options,
        ROOFS,
        model_costs(config, "float32"),
        {"baseline": baseline, "optimized": optimized},
        None,
    )
    assert report.parity["throughput"].request_fraction == 1.0, (
        "the optimized path kept each request's tokens"
    )
    own = report.batched_parity["throughput"]
    assert own.identical_requests == 2 and len(own.results) == 4, "the baseline's batch moved a, twice"
    markdown = report.to_markdown()
    assert "throughput: parity is against each request's tokens from the baseline alone" in markdown
    assert "kept them on 2/4 requests · 75.0% of positions; the optimized path on 4/4" in markdown
    doc = report.to_json()
    assert doc["baseline_batched_vs_alone"]["throughput"]["identical_requests"] == 2


async def test_the_reference_runs_each_batched_request_alone_untimed(tmp_path: Path) -> None:
    engine = FakeEngine("baseline", delay_s=0.0)
    await engine.start()
    options = BenchOptions(workloads=("single", "throughput"), requests=3, max_tokens=4, peer=False)
    runs = await run_alone(engine, options, load_workloads())  # type: ignore[arg-type]
    assert list(runs) == ["throughput alone"]
    (run,) = runs["throughput alone"]
    assert [r.id.split("#")[1] for r in run.requests] == ["0", "1", "2"], "the batched requests, by id"
