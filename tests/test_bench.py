"""The bench machinery on the real engines (tiny checkpoint, small counts): every workload on both
paths, the report's structure and JSON, and the parity computation. No timing assertions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.bench.model_costs import model_costs
from backend.bench.options import BenchOptions
from backend.bench.report import BenchReport, PathRun, PeerRun, _parity
from backend.bench.roofs import Roofs
from backend.bench.session import run_workloads
from backend.bench.workload_runs import RequestResult
from backend.bench.workloads import load_workloads
from backend.engine.metrics import TurnMetrics
from backend.engine.model_source import ModelSource
from backend.engine.vllm import VllmEngine
from backend.settings import Settings

OPTIONS = BenchOptions(
    requests=3, single_requests=1, conversations=1, chat_turns=2, max_tokens=6, chat_max_tokens=4
)


def test_parity_finds_a_known_divergence() -> None:
    same = RequestResult("a", (1, 2, 3, 4), TurnMetrics())
    base = (same, RequestResult("b", (5, 6, 7, 8), TurnMetrics()))
    opt = (same, RequestResult("b", (5, 6, 9, 8), TurnMetrics()))
    report = _parity(base, opt)
    assert report.identical_requests == 1
    assert report.position_fraction == pytest.approx(6 / 8)
    (_, diverged) = report.results[1]
    assert (diverged.index, diverged.token_a, diverged.token_b) == (2, 7, 9)


@pytest.mark.engine
async def test_bench_on_both_paths_builds_the_report(
    path_engines: tuple[VllmEngine, VllmEngine], tiny_source: ModelSource, tmp_path: Path
) -> None:
    baseline, optimized = path_engines
    workloads = load_workloads()
    stages: list[tuple[str, int, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        stages.append((stage, done, total))

    paths = {}
    for name, engine in (("baseline", baseline), ("optimized", optimized)):
        runs = await run_workloads(engine, name, OPTIONS, workloads, progress)
        paths[name] = PathRun(name, runs, engine.config.engine_kwargs(), engine.config.env_values(), 1.0)
    assert ("baseline: throughput", 3, 3) in stages and ("optimized: chat", 2, 2) in stages

    throughput = paths["optimized"].workloads["throughput"]
    assert len(throughput.requests) == 3
    assert all(len(r.token_ids) == 6 for r in throughput.requests), "ignore_eos: equal lengths"
    chat = paths["baseline"].workloads["chat"]
    assert [r.turn for r in chat.requests] == [0, 1]
    assert chat.requests[1].metrics.prompt_tokens > chat.requests[0].metrics.prompt_tokens, "history grows"
    media = paths["baseline"].workloads["media"]
    assert len(media.requests) == 2 and all(r.metrics.prompt_tokens > 60 for r in media.requests)
    assert paths["optimized"].workloads["single"].acceptance is not None, "the MTP drafter drafted"

    config = json.loads((tiny_source.path / "config.json").read_text())
    roofs = Roofs(flops_per_s=1e11, bytes_per_s=1e10, threads=1, dtype="float32", device="cpu")
    report = BenchReport.build(
        tiny_source, Settings(), OPTIONS, roofs, model_costs(config, "float32"), paths, PeerRun("float32", 1)
    )
    for name in ("throughput", "single", "chat", "media"):
        parity = report.parity[name]
        assert parity.request_fraction == 1.0, f"{name}: float32 paths must match token for token"
    metrics = {(r.workload, r.metric.split(" (")[0]) for r in report.rows}
    assert ("throughput", "aggregate tok/s") in metrics and ("chat", "TTFT ms, later turns") in metrics
    assert all(r.ratio is None or r.ratio > 0 for r in report.rows)

    doc = json.loads(json.dumps(report.to_json()))
    assert doc["schema_version"] == 1
    assert set(doc) >= {
        "meta",
        "roofs",
        "rows",
        "parity",
        "speculative_acceptance",
        "peak_memory_gib",
        "paths",
    }
    assert doc["roofs"]["compute_roof_tokens_per_s"] > 0 and doc["roofs"]["threads"] == 1
    assert doc["meta"]["versions"]["vllm"]
    assert doc["paths"]["optimized"]["engine_args"]["speculative_config"]
    row = doc["rows"][0]
    assert set(row) >= {"workload", "metric", "baseline", "optimized", "ratio", "transformers", "roof"}
    assert doc["parity"]["chat"]["identical_requests"] == 2  # one conversation, two turns

    markdown = report.to_markdown()
    assert markdown.count("\n| ") >= len(report.rows) + 1
    assert "| throughput | aggregate tok/s (3 at once) |" in markdown
    assert "compute roof" in markdown and "bandwidth roof" in markdown
