"""Bench's attention rows: on a card where vLLM runs Gemma 4 on Triton (Ampere and Ada: no
FlashAttention 4), the optimized path again with each other attention backend vLLM offers for
Gemma 4's head sizes that can start for the model here (``gpu_attention.attention_candidates``:
FlashAttention for the 256-dim sliding layers, FlashInfer or FlexAttention for the 512-dim full
ones), so the table shows which one a card should run. A GPU holds one more engine at most, so
each variant runs alone after the main table, with the same workloads and repetitions; a variant
that fails to start or answer is said and skipped. Each row compares the variant with the
optimized path on vLLM's own attention (same workload, same repetition; not interleaved, so a drift
between them would show) and gives its token parity with the baseline.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from backend.bench.rows import Row, figure, rows_for
from backend.engine.argument import Argument
from backend.engine.speculation.choice import attention_label
from backend.errors import problem_of

if TYPE_CHECKING:
    from pathlib import Path

    from backend.bench.options import BenchOptions, Progress
    from backend.bench.workload_runs import WorkloadRun
    from backend.bench.workloads import Workloads
    from backend.config.settings import Settings
    from backend.engine.gpu.memory_plan import MemoryPlan
    from backend.engine.model.source import ModelSource
    from backend.engine.parity import ParityReport
    from backend.engine.paths.engine_args import EngineConfig

WarmUp = Callable[[Any, str, "BenchOptions", "Workloads", "Progress"], Awaitable[None]]
RunAll = Callable[
    [Mapping[str, Any], "BenchOptions", "Workloads", "Progress"],
    Awaitable[dict[str, dict[str, list["WorkloadRun"]]]],
]
"""bench's ``warm_up`` and ``run_interleaved`` (``backend.bench.session``), passed in."""
MARK = "optimized+"
"""A variant's path name: ``optimized+full_attention on FLASHINFER``."""


def card_variants(source: ModelSource, plan: MemoryPlan | None, exact: bool) -> tuple[str, ...]:
    """The attention configs (JSON) bench tries beside vLLM's own on this card: the Triton cards'
    candidates that can start for this model here; none on a CPU, on cards where vLLM runs one fast
    backend on every layer, or in exact mode (batch-invariant kernels are chosen for it)."""
    if plan is None or exact:
        return ()
    from backend.engine.gpu.attention import ModelAttention, attention_candidates
    from backend.engine.gpu.card import detect_gpu

    gpu = detect_gpu()
    if gpu is None:
        return ()
    candidates = attention_candidates(gpu.capability, ModelAttention.read(source.path))
    return tuple(json.dumps(config, sort_keys=True) for config in candidates.others)


def variant_configs(optimized: EngineConfig, variants: tuple[str, ...]) -> dict[str, EngineConfig]:
    """The optimized path's config with each variant's ``attention_config``, by path name."""
    base = optimized.args.get("attention_config")
    configs = {}
    for variant in variants:
        attention = {**(dict(base.value) if base is not None else {}), **json.loads(variant)}
        why = "bench's attention variant: another backend vLLM offers for Gemma 4's head sizes"
        args = {**optimized.args, "attention_config": Argument(attention, why)}
        configs[MARK + attention_label(variant)] = replace(optimized, args=args)
    return configs


@dataclass(frozen=True)
class VariantRows:
    name: str
    rows: tuple[Row, ...]
    """Per workload: the optimized path's runs (``baseline_runs``) against the variant's."""
    parity: Mapping[str, ParityReport]
    """Per workload: the variant's tokens against the baseline's."""
    failed: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "attention": self.name.removeprefix(MARK),
            "failed": self.failed or None,
            "rows": [row.to_json() for row in self.rows],
            "parity_with_baseline": {
                w: {"identical_requests": p.identical_requests, "requests": len(p.results)}
                for w, p in self.parity.items()
            },
        }


def variant_rows(
    runs: Mapping[str, dict[str, list[WorkloadRun]]],
    failed: Mapping[str, str],
    options: BenchOptions,
    parity: Any,
) -> list[VariantRows]:
    """Each variant's rows; ``parity(base_runs, variant_runs)`` is the report's own comparison."""
    baseline, optimized = runs.get("baseline", {}), runs.get("optimized", {})
    out = []
    for name in [*(n for n in runs if n.startswith(MARK)), *failed]:
        mine = runs.get(name, {})
        rows = tuple(
            row
            for w in options.workloads
            if mine.get(w)
            for row in rows_for(w, optimized.get(w, []), mine[w], None, None, None)
        )
        both = [w for w in options.workloads if mine.get(w) and baseline.get(w)]
        checked = {w: parity(baseline[w], mine[w]) for w in both}
        out.append(VariantRows(name, rows, checked, failed.get(name, "")))
    return out


def variants_markdown(variants: list[VariantRows]) -> list[str]:
    """The report's section (empty without variants)."""
    if not variants:
        return []
    lines = [
        "",
        "Attention on this card — the optimized path with each other backend vLLM offers for Gemma 4's "
        "head sizes, each run alone after the table (not interleaved):",
        "",
        "| attention | workload | metric | variant | vs optimized (vLLM's attention) "
        "| parity with baseline |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for variant in variants:
        label = variant.name.removeprefix(MARK)
        if variant.failed:
            lines.append(f"| {label} | — | failed: {variant.failed} | | | |")
        for row in variant.rows:
            p = variant.parity.get(row.workload)
            shown = f"{p.identical_requests}/{len(p.results)}" if p else "—"
            ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "—"
            shown_runs = figure(row.optimized_runs)
            lines.append(f"| {label} | {row.workload} | {row.metric} | {shown_runs} | {ratio} | {shown} |")
    return lines


async def measure_variants(
    source: ModelSource,
    configs: Mapping[str, EngineConfig],
    options: BenchOptions,
    workloads: Workloads,
    progress: Progress,
    log_dir: Path,
    warm_up: WarmUp,
    run: RunAll,
) -> tuple[dict[str, dict[str, list[WorkloadRun]]], dict[str, str]]:
    """Each variant's engine alone: started, ``warm_up``, ``run`` as the paths were (bench's own
    functions, passed in), shut down; the runs, and why each variant that failed did (the others
    go on)."""
    from backend.bench.options import BENCH_LOG
    from backend.engine.local.vllm import VllmEngine

    runs: dict[str, dict[str, list[WorkloadRun]]] = {}
    failed: dict[str, str] = {}
    for name, config in configs.items():
        engine = VllmEngine(source, config, log_path=log_dir / BENCH_LOG)
        try:
            progress(f"{name}: starting the engine", 0, 1)
            await engine.start()
            progress(f"{name}: starting the engine", 1, 1)
            await warm_up(engine, name, options, workloads, progress)
            runs.update(await run({name: engine}, options, workloads, progress))
        except Exception as error:  # any engine failure: this variant is out, the bench goes on
            failed[name] = problem_of(error)
            progress(f"{name}: failed, skipped — {failed[name]}", 1, 1)
        finally:
            await engine.shutdown()
    return runs, failed


async def attention_variants(
    source: ModelSource,
    settings: Settings,
    options: BenchOptions,
    configs: dict[str, EngineConfig],
    plan: MemoryPlan | None,
    remote: bool,
    workloads: Workloads,
    progress: Progress,
    log_dir: Path,
    warm_up: WarmUp,
    run: RunAll,
) -> tuple[dict[str, dict[str, list[WorkloadRun]]], dict[str, str]]:
    """The optimized path with each other attention backend (``variants``), where this card has
    any: their runs, and why each that failed did."""
    tried = (
        card_variants(source, plan, settings.engine.exact) if options.attention is None else options.attention
    )
    if not tried or "optimized" not in configs or remote or not options.workloads:
        return {}, {}
    configs = variant_configs(configs["optimized"], tried)
    return await measure_variants(source, configs, options, workloads, progress, log_dir, warm_up, run)
