"""The bench machinery on the real engines (tiny checkpoint, small counts): every workload on both
paths, interleaved and repeated, the report's structure and JSON, the parity computation, the
spread arithmetic and the identical-paths report. No timing assertions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.bench import session
from backend.bench.model_costs import model_costs
from backend.bench.options import BenchOptions, capped, with_levels
from backend.bench.peer import PeerRun
from backend.bench.report import BenchReport, PathRun, _parity
from backend.bench.roofs import Roofs
from backend.bench.rows import Row
from backend.bench.session import path_configs, run_interleaved, same_configs, warm_up
from backend.bench.workload_runs import RequestResult, WorkloadRun
from backend.bench.workloads import load_workloads
from backend.compat.processes import uni_worker
from backend.compat.speculation import one_call_step, prefill_drafts, sampled_row_drafts
from backend.config.settings import Settings
from backend.engine.local.vllm import VllmEngine
from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource
from backend.engine.parity import SAME_PATHS
from backend.engine.protocol import EngineRequest, TurnEvent

OPTIONS = BenchOptions(
    requests=5,  # above the CPU schedule's drafting limit (4): steps that ask for no drafts
    single_requests=1,
    conversations=1,
    chat_turns=2,
    max_tokens=6,
    chat_max_tokens=4,
    repetitions=2,
    settle_s=0.05,
)
ROOFS = Roofs(flops_per_s=1e11, bytes_per_s=1e10, threads=1, dtype="float32", device="cpu")


class Recording:
    """An engine that notes the order requests reach it, then lets the real one answer."""

    def __init__(self, name: str, engine: VllmEngine, seen: list[tuple[str, str]]) -> None:
        self.name, self.engine, self.seen = name, engine, seen

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        self.seen.append((self.name, request.request_id))
        return self.engine.stream(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def test_a_ratio_is_the_median_of_paired_repetitions_and_noise_is_flagged() -> None:
    clear = Row("single", "decode tok/s", "tok/s", (100.0, 120.0, 80.0), (210.0, 230.0, 170.0))
    assert clear.baseline == 100.0 and clear.optimized == 210.0
    assert clear.ratio == pytest.approx(2.1) and clear.within_noise is False
    assert clear.ratios.low == pytest.approx(170 / 80) or clear.ratios.low == pytest.approx(230 / 120)
    noisy = Row("single", "decode tok/s", "tok/s", (100.0, 100.0, 100.0), (130.0, 90.0, 110.0))
    assert noisy.within_noise is True
    ttft = Row("single", "TTFT ms", "ms", (10.0, 12.0), (5.0, 6.0), higher_is_better=False)
    assert ttft.ratio == pytest.approx(2.0) and ttft.within_noise is False
    one = Row("single", "decode tok/s", "tok/s", (100.0,), (150.0,))
    assert one.within_noise is None, "one repetition cannot tell noise from a result"


def test_parity_finds_a_known_divergence() -> None:
    same = RequestResult("a", (1, 2, 3, 4), TurnMetrics())
    base = (same, RequestResult("b", (5, 6, 7, 8), TurnMetrics()))
    opt = (same, RequestResult("b", (5, 6, 9, 8), TurnMetrics()))
    report = _parity(base, opt)
    assert report.identical_requests == 1
    assert report.position_fraction == pytest.approx(6 / 8)
    (_, diverged) = report.results[1]
    assert (diverged.index, diverged.token_a, diverged.token_b) == (2, 7, 9)


def _run(path: str, tokens: tuple[int, ...], rate: float) -> WorkloadRun:
    metrics = TurnMetrics(generated_tokens=len(tokens), decode_tokens_per_s=rate, ttft_s=0.01)
    return WorkloadRun("single", path, (RequestResult("p", tokens, metrics),), 1.0)


def test_identical_paths_report_that_nothing_applies(tiny_source: ModelSource) -> None:
    """Where both paths would get the same arguments and environment, no ratio is printed."""
    options = BenchOptions(workloads=("single",), repetitions=3, peer=False)
    settings = Settings()
    configs = path_configs(tiny_source, settings, options)
    assert not same_configs(configs), "on the tiny checkpoint the optimized path drafts with MTP"
    assert same_configs({"baseline": configs["baseline"], "optimized": configs["baseline"]})
    runs = [_run("baseline", (1, 2, 3), rate) for rate in (100.0, 140.0, 120.0)]
    paths = {"baseline": PathRun("baseline", {"single": runs}, {}, {})}
    config = json.loads((tiny_source.path / "config.json").read_text())
    costs = model_costs(config, "float32")
    report = BenchReport.build(tiny_source, settings, options, ROOFS, costs, paths, None, same_paths=True)
    markdown = report.to_markdown()
    assert SAME_PATHS in markdown and "nothing applies" in markdown
    assert "x (" not in markdown, "no speed-up ratio anywhere"
    assert "| single | decode tok/s | — | 120 (100–140) | = baseline |" in markdown
    doc = report.to_json()
    assert doc["same_paths"] is True and doc["same_paths_message"] == SAME_PATHS
    assert all(row["ratio"] is None for row in doc["rows"])


@pytest.mark.engine
async def test_bench_on_both_paths_builds_the_report(
    path_engines: tuple[VllmEngine, VllmEngine],
    tiny_source: ModelSource,
    tmp_path: Path,
    gemma_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Also: the optimized engine's worker computes in its engine-core process (its tokens are the
    baseline's, below), and every timed run starts after a pause for the engine before it to go quiet."""
    baseline, optimized = path_engines
    settle = session.settle

    async def recorded_settle(seconds: float | None = None) -> None:
        seen.append(("settle", str(seconds)))
        await settle(seconds)

    monkeypatch.setattr(session, "settle", recorded_settle)
    workloads = load_workloads()
    stages: list[tuple[str, int, int]] = []
    seen: list[tuple[str, str]] = []

    def progress(stage: str, done: int, total: int) -> None:
        stages.append((stage, done, total))

    engines = {
        name: Recording(name, e, seen) for name, e in (("baseline", baseline), ("optimized", optimized))
    }
    for name, engine in engines.items():
        await warm_up(engine, name, OPTIONS, workloads, progress)
    runs = await run_interleaved(engines, OPTIONS, workloads, progress)
    paths = {
        name: PathRun(name, runs[name], engine.config.engine_kwargs(), engine.config.env_values())
        for name, engine in (("baseline", baseline), ("optimized", optimized))
    }
    assert ("baseline: throughput", 10, 10) in stages and ("optimized: chat", 4, 4) in stages
    timed = [entry for entry in seen if not entry[1].startswith("bench-warm-")]
    starts = [i for i, (path, _) in enumerate(timed) if path != "settle" and timed[i - 1][0] == "settle"]
    assert len(starts) == 2 * 2 * len(OPTIONS.workloads), "a pause before each path's run, every round"
    assert timed[0] == ("settle", "0.05") and timed.count(("settle", "0.05")) == len(starts)
    measured = [(path, rid) for path, rid in timed if path != "settle"]
    assert len({(p, rid) for p, rid in measured}) == len(measured), "request ids unique per repetition"
    blocks = [(path, rid.split("-")[1]) for path, rid in measured]
    blocks = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
    per_round = 2 * len(OPTIONS.workloads)
    assert [rep for _, rep in blocks] == ["r0"] * per_round + ["r1"] * per_round, blocks
    assert [path for path, _ in blocks[:per_round]] == ["baseline", "optimized"] * len(OPTIONS.workloads)
    assert [path for path, _ in blocks[per_round:]] == ["optimized", "baseline"] * len(OPTIONS.workloads)
    assert all(rid.startswith("bench-r0-") for _, rid in measured[: len(measured) // 2])
    assert all(len(reps) == 2 for path in runs.values() for reps in path.values())

    throughput = paths["optimized"].workloads["throughput"][1]
    assert len(throughput.requests) == 5
    assert all(len(r.token_ids) == 6 for r in throughput.requests), "ignore_eos: equal lengths"
    chat = paths["baseline"].workloads["chat"][0]
    assert [r.turn for r in chat.requests] == [0, 1]
    assert chat.requests[1].metrics.prompt_tokens > chat.requests[0].metrics.prompt_tokens, "history grows"
    media = paths["baseline"].workloads["media"][0]
    assert len(media.requests) == 2 and all(r.metrics.prompt_tokens > 60 for r in media.requests)
    assert paths["optimized"].workloads["single"][0].acceptance is not None, "the MTP drafter drafted"

    config = json.loads((tiny_source.path / "config.json").read_text())
    report = BenchReport.build(
        tiny_source, Settings(), OPTIONS, ROOFS, model_costs(config, "float32"), paths, PeerRun("float32", 1)
    )
    for name in ("throughput", "single", "chat", "media"):
        parity = report.parity[name]
        assert parity.request_fraction == 1.0, f"{name}: float32 paths must match token for token"
        per_rep = len(paths["baseline"].workloads[name][0].requests)
        assert len(parity.results) == 2 * per_rep, "every repetition is compared"
    metrics = {(r.workload, r.metric.split(" (")[0]) for r in report.rows}
    assert ("throughput", "aggregate tok/s") in metrics and ("chat", "TTFT ms, later turns") in metrics
    assert all(r.ratio is None or r.ratio > 0 for r in report.rows)

    assert all(len(r.baseline_runs) == 2 and len(r.optimized_runs) == 2 for r in report.rows)
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["schema_version"] == 2 and doc["same_paths"] is False
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
    assert doc["paths"]["optimized"]["env"][uni_worker.ENV] == "1"
    assert uni_worker.ENV not in doc["paths"]["baseline"]["env"]
    logs = {
        name: (gemma_home / "logs" / f"{name}-engine.log").read_text() for name in ("baseline", "optimized")
    }
    assert "(Worker pid=" not in logs["optimized"], "its worker computed in the engine-core process"
    assert "(Worker pid=" in logs["baseline"], "stock vLLM: a worker process"
    assert uni_worker.IN_USE in logs["optimized"] and uni_worker.IN_USE not in logs["baseline"]
    assert one_call_step.IN_USE in logs["optimized"], "its worker answered steps in one call"
    assert one_call_step.IN_USE not in logs["baseline"]
    assert prefill_drafts.IN_USE in logs["optimized"], "its prefill steps answered without drafting"
    assert prefill_drafts.IN_USE not in logs["baseline"]
    assert prefill_drafts.NONE_ASKED in logs["optimized"], "5 at once: steps asked for no drafts, none ran"
    assert sampled_row_drafts.IN_USE in logs["optimized"], "its drafter's first pass took the sampled rows"
    assert sampled_row_drafts.IN_USE not in logs["baseline"]
    row = doc["rows"][0]
    assert set(row) >= {"workload", "metric", "baseline", "optimized", "ratio", "transformers", "roof"}
    assert set(row) >= {"baseline_runs", "optimized_runs", "ratio_low", "ratio_high", "within_noise"}
    assert doc["parity"]["chat"]["identical_requests"] == 4  # one conversation, two turns, twice

    markdown = report.to_markdown()
    assert markdown.count("\n| ") >= len(report.rows) + 1
    assert "| throughput | aggregate tok/s (5 at once) |" in markdown
    assert "compute roof" in markdown and "bandwidth roof" in markdown
    assert "2 repetition(s), interleaved" in markdown
    assert "CPU flags:" in markdown and "median of the per-repetition ratios" in markdown


def test_step_costs_imply_a_speedup_labelled_as_a_prediction() -> None:
    from backend.bench.step_costs import StepCosts, step_costs_markdown

    costs = StepCosts({1: 100.0, 2: 110.0, 3: 125.0, 5: 160.0}, {1: 8, 2: 8, 3: 8, 5: 8})
    assert costs.implied_speedup(2, 2.5) == pytest.approx(2.5 * 100 / 125)
    assert costs.implied_speedup(3, 3.0) is None, "no step of 4 rows was recorded"
    measured = step_costs_markdown(costs, {1: 1.86, 2: 2.61}, "the demo model")
    assert "plain step 100.0 ms" in measured
    assert "| 2 | 125.0 ms | 1.25 | 2.61 | 2.09x |" in measured
    assert "| 1 | 110.0 ms | 1.10 | 1.86 | 1.69x |" in measured and "| 4 |" in measured
    assert "measured by the probe on the demo model" in measured and "A prediction" in measured
    assumed = step_costs_markdown(costs, {}, "the demo model")
    assert assumed.count("| 2 | 125.0 ms |") == 4 and "acceptance lengths assumed" in assumed
    assert "| 4 |" not in measured.split("Drafts by load")[1], "no step of 4 requests was recorded"


def test_drafts_by_load_say_the_acceptance_each_count_must_reach() -> None:
    from backend.bench.step_costs import StepCosts, load_rows, step_costs_markdown

    assert {1, 2, 5, 4, 8, 6, 10, 16, 32, 40} <= set(load_rows())
    costs = StepCosts({1: 100.0, 2: 104.0, 4: 110.0, 6: 130.0, 8: 150.0, 16: 300.0, 12: 220.0})
    assert costs.break_even(2, 1) == pytest.approx(110 / 104)
    assert costs.break_even(4, 3) == pytest.approx(300 / 110)
    assert costs.break_even(8, 1) == 2.0 and costs.break_even(8, 2) is None
    table = step_costs_markdown(costs, {}, "the demo model")
    assert "| 2 | 104.0 ms | 1.06 | 1.25 | 1.44 | – |" in table
    assert "| 4 | 110.0 ms | 1.36 | 2.00 | 2.73 | – |" in table
    assert "| 8 | 150.0 ms | 2.00 | – | – | – |" in table


@pytest.mark.engine
def test_bench_step_costs_alone_on_the_real_engine(gemma_home: Path, tmp_path: Path) -> None:
    """`bench --workload none --step-costs` as a user runs it: one engine with vLLM's iteration
    records, a median for every row count, no workload table (what `--dummy-weights` does on a CPU)."""
    import os
    import subprocess
    import sys

    report = tmp_path / "steps.json"
    flags = ["--dtype", "float32", "--json", str(report)]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            *["bench", "--size", "tiny", "--workload", "none", "--step-costs"],
            *flags,
        ],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "GEMMA_CHAT_HOME": str(gemma_home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-2000:]
    assert "**Step costs**" in run.stdout and "implied speed-up" in run.stdout
    assert "| workload | metric |" not in run.stdout, "no workloads were asked for"
    costs = json.loads(report.read_text())["step_costs"]
    medians = costs["median_step_ms_by_rows"]
    from backend.bench.step_costs import load_rows

    assert set(medians) == {str(n) for n in load_rows()} and all(v > 0 for v in medians.values())
    assert "**Drafts by load**" in run.stdout
    assert all(n >= 4 for n in costs["decode_steps_by_rows"].values())


def test_several_levels_make_a_concurrency_table_and_one_keeps_throughput() -> None:
    assert with_levels(("throughput", "single"), (64, 1, 8)) == (
        "throughput@1",
        "throughput@8",
        "throughput@64",
        "single",
    )
    assert with_levels(("throughput", "chat"), (8,)) == ("throughput", "chat")
    assert with_levels(("single",), (1, 8)) == ("single",)
    kept, dropped = capped(("throughput@8", "throughput@64", "throughput@256", "chat"), 155)
    assert kept == ("throughput@8", "throughput@64", "chat") and dropped == (256,)


@pytest.mark.engine
async def test_the_concurrency_table_on_the_real_engines(
    path_engines: tuple[VllmEngine, VllmEngine], tiny_source: ModelSource
) -> None:
    """Each level's requests at once, on both paths, a row and a parity each (the seed's table)."""
    options = BenchOptions(
        workloads=with_levels(("throughput",), (1, 3)), requests=1, max_tokens=4, repetitions=1, settle_s=0.05
    )
    engines = dict(zip(("baseline", "optimized"), path_engines, strict=True))
    runs = await run_interleaved(engines, options, load_workloads(), lambda *_: None)
    paths = {
        name: PathRun(name, runs[name], e.config.engine_kwargs(), e.config.env_values())
        for name, e in engines.items()
    }
    assert [len(paths["optimized"].workloads[f"throughput@{n}"][0].requests) for n in (1, 3)] == [1, 3]
    config = json.loads((tiny_source.path / "config.json").read_text())
    report = BenchReport.build(
        tiny_source, Settings(), options, ROOFS, model_costs(config, "float32"), paths, PeerRun("float32", 1)
    )
    assert [r.metric for r in report.rows] == ["aggregate tok/s (1 at once)", "aggregate tok/s (3 at once)"]
    assert report.parity["throughput@3"].request_fraction == 1.0
    assert "| throughput@3 | aggregate tok/s (3 at once) |" in report.to_markdown()
