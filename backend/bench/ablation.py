"""Bench's ablation rows: what earned the optimized path's speed-up.

The optimized path differs from the baseline in a few parts; each ablation is the baseline with one
of them added, run alone after the main table with the same workloads and repetitions (bench's
own warm-up and runs), and compared with the baseline:

* ``batch limits``: the optimized path's ``max_num_seqs`` / ``max_num_batched_tokens``. On a GPU
  both paths get what ``vllm serve`` uses on the card (``backend.engine.gpu.serve_limits``) and
  on a CPU neither sets them, so this row says "same as the baseline" and runs nothing;
* ``speculation``: the optimized path's ``speculative_config`` (on a card with its CUDA graphs for
  every draft level) with the environment it adds only when it speculates (drafts by load, no
  drafter on steps that draft nothing, …) — found as what the optimized path's environment loses
  with ``speculation = "none"`` — and, on a CPU, its draft plan (the drafts a step proposes, set
  at the engine's start from what the optimized path's first start measured);
* ``attention``: the optimized path's ``attention_config`` (a measured backend; none on a CPU);
* ``all``: the optimized path itself (the main table's runs).

A part that is the same on both paths is said and not run. Each row carries the drafts its
requests proposed (per repetition) and the share the target accepted, so a speed-up without
drafts cannot pass as speculation's. The rest of the optimized path (a CPU's kernels and worker)
is in ``all`` only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from backend.bench.rows import Row, figure, rows_for
from backend.bench.workload_runs import WorkloadRun, acceptance_of

if TYPE_CHECKING:
    from backend.bench.options import BenchOptions
    from backend.config.settings import EngineSettings
    from backend.engine.gpu.memory_plan import MemoryPlan
    from backend.engine.model.source import ModelSource
    from backend.engine.paths.engine_args import EngineConfig

Runs = dict[str, dict[str, list[WorkloadRun]]]

MARK = "baseline+"
"""An ablation's path name: ``baseline+speculation``."""
BATCH_ARGS = ("max_num_seqs", "max_num_batched_tokens")
SPECULATION_ARGS = ("speculative_config", "per_request_spec_decode_metrics", "compilation_config")
"""On a card ``compilation_config`` is the CUDA graphs sized for every draft level (``gpu_batch``)."""
ATTENTION_ARGS = ("attention_config",)
PARTS = ("batch limits", "speculation", "attention")
ALL = "all (the optimized path)"


@dataclass(frozen=True)
class Ablation:
    part: str
    config: EngineConfig | None
    """The baseline with this part added; None where the part is the same on both paths."""
    adds: tuple[str, ...]
    """The arguments and environment variables it adds (empty: nothing differs)."""


def ablations(baseline: EngineConfig, optimized: EngineConfig, unspeculated: EngineConfig) -> list[Ablation]:
    """Each part of the optimized path added alone to the baseline. ``unspeculated``: the optimized
    path's config with ``speculation = "none"`` (what its environment has without drafts)."""
    spec_env = tuple(k for k in optimized.env if k not in unspeculated.env)
    keys = {
        "batch limits": (BATCH_ARGS, ()),
        "speculation": (SPECULATION_ARGS, spec_env),
        "attention": (ATTENTION_ARGS, ()),
    }
    out = []
    for part in PARTS:
        arg_keys, env_keys = keys[part]
        args = {
            k: optimized.args[k]
            for k in arg_keys
            if k in optimized.args and _value(optimized.args, k) != _value(baseline.args, k)
        }
        env = {k: optimized.env[k] for k in env_keys if k not in baseline.env}
        if not args and not env:
            out.append(Ablation(part, None, ()))
            continue
        config = replace(baseline, args={**baseline.args, **args}, env={**baseline.env, **env})
        if part == "speculation":  # on a CPU the drafts a step proposes are set at start by the plan
            config = replace(config, drafts=optimized.drafts)
        adds = (*args, *(f"env {k}" for k in env))
        out.append(Ablation(part, config, adds))
    return out


def _value(args: Mapping[str, Any], key: str) -> Any:
    argument = args.get(key)
    return None if argument is None else repr(argument.value)


def ablation_configs(found: list[Ablation]) -> dict[str, EngineConfig]:
    """The ablations that run, by path name."""
    return {MARK + a.part: a.config for a in found if a.config is not None}


@dataclass(frozen=True)
class AblationRows:
    part: str
    adds: tuple[str, ...]
    rows: tuple[Row, ...]
    """Per workload: the baseline's runs against this ablation's."""
    drafts: Mapping[str, float | None]
    """Per workload: drafts proposed per repetition (None: the part runs nothing)."""
    acceptance: Mapping[str, float | None]
    failed: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "adds": list(self.adds),
            "failed": self.failed or None,
            "rows": [row.to_json() for row in self.rows],
            "drafts_per_repetition": dict(self.drafts),
            "speculative_acceptance": dict(self.acceptance),
        }


def _drafts(runs: list[WorkloadRun]) -> float | None:
    if not runs:
        return None
    return sum(r.metrics.drafted_tokens or 0 for run in runs for r in run.requests) / len(runs)


def ablation_rows(
    found: list[Ablation],
    runs: Mapping[str, dict[str, list[WorkloadRun]]],
    failed: Mapping[str, str],
    options: BenchOptions,
) -> list[AblationRows]:
    """Each part's rows against the baseline, then ``all``'s (the optimized path's own runs)."""
    baseline = runs.get("baseline", {})
    out = []
    parts = [(a.part, a.adds, MARK + a.part) for a in found]
    if "optimized" in runs:
        parts.append((ALL, ("everything above and the rest of the path",), "optimized"))
    for part, adds, name in parts:
        mine = runs.get(name, {})
        ran = [w for w in options.workloads if mine.get(w) and baseline.get(w)]
        rows = tuple(row for w in ran for row in rows_for(w, baseline[w], mine[w], None, None, None))
        drafts = {w: _drafts(mine[w]) for w in ran}
        accepted = {w: acceptance_of(r for run in mine[w] for r in run.requests) for w in ran}
        out.append(AblationRows(part, adds, rows, drafts, accepted, failed.get(name, "")))
    return out


def ablation_markdown(rows: list[AblationRows]) -> list[str]:
    """The report's section (empty without ablations)."""
    if not rows:
        return []
    lines = [
        "",
        "What earned it — the baseline with one part of the optimized path added, each run alone after "
        "the table (not interleaved), against the baseline:",
        "",
        "| added to the baseline | workload | metric | figure | vs baseline | drafts a repetition "
        "| acceptance |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for ablation in rows:
        if ablation.failed:
            lines.append(f"| {ablation.part} | — | failed: {ablation.failed} | | | | |")
        elif not ablation.adds:
            lines.append(f"| {ablation.part} | — | same as the baseline: not run | | 1.00x | 0 | — |")
        for row in ablation.rows:
            ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "—"
            drafts = ablation.drafts.get(row.workload)
            accepted = ablation.acceptance.get(row.workload)
            lines.append(
                f"| {ablation.part} | {row.workload} | {row.metric} | {figure(row.optimized_runs)} | {ratio} "
                f"| {'—' if drafts is None else f'{drafts:,.0f}'} "
                f"| {'—' if accepted is None else f'{accepted:.0%}'} |"
            )
    return lines


async def measure_ablations(
    source: ModelSource,
    settings: EngineSettings,
    options: BenchOptions,
    configs: Mapping[str, EngineConfig],
    plan: MemoryPlan | None,
    remote: bool,
    run_alone: Callable[[dict[str, EngineConfig]], Awaitable[tuple[Runs, dict[str, str]]]],
) -> tuple[list[Ablation], Runs, dict[str, str]]:
    """Each part's engine alone (``run_alone``: bench's ``measure_variants`` with its warm-up and
    runs), where both paths ran here: the parts, their runs, and why each that failed did."""
    if (
        not options.ablation
        or remote
        or not options.workloads
        or not {"baseline", "optimized"} <= set(configs)
    ):
        return [], {}, {}
    from backend.engine.paths.engine_args import EnginePath, engine_config

    plain = settings.model_copy(update={"speculation": "none"})
    unspeculated = engine_config(EnginePath.optimized(), source, plain, 1, plan)
    found = ablations(configs["baseline"], configs["optimized"], unspeculated)
    runs, failed = await run_alone(ablation_configs(found))
    return found, runs, failed
