"""The bench's report: per workload, each path's figures (median and range over the repetitions),
the speed-up (median of per-repetition ratios, its range, "within noise" where the range reaches
1.0), token parity over every repetition (requests and positions identical, first divergence of
each differing request), speculative acceptance, peak memory, the roofs — as JSON (everything)
and as a Markdown table that pastes as is. Where both paths would start with identical
arguments and environment only one is run and the report says so instead of a ratio."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from backend.bench.ablation import Ablation, AblationRows, ablation_markdown, ablation_rows
from backend.bench.alone import alone_markdown, alone_name
from backend.bench.hardware import peer_label
from backend.bench.rows import Row, figure, num, rows_for
from backend.bench.variants import VariantRows, variant_rows, variants_markdown
from backend.bench.workload_runs import RequestResult, WorkloadRun, acceptance_of
from backend.engine.parity import SAME_PATHS, ParityReport, compare_tokens
from backend.errors import GemmaChatError

if TYPE_CHECKING:
    from backend.bench.model_costs import ModelCosts
    from backend.bench.options import BenchOptions
    from backend.bench.peer import PeerRun
    from backend.bench.roofs import Roofs
    from backend.bench.step_costs import StepCosts
    from backend.config.settings import Settings
    from backend.engine.model.source import ModelSource

SCHEMA_VERSION = 2


@dataclass
class PathRun:
    path: str
    workloads: dict[str, list[WorkloadRun]]
    """Per workload, one run per repetition, in the order they ran."""
    engine_args: dict[str, Any]
    env: dict[str, str]


@dataclass
class BenchReport:
    meta: dict[str, Any]
    rows: list[Row]
    parity: dict[str, ParityReport]
    peer_parity: dict[str, ParityReport]
    acceptance: dict[str, float | None]
    memory_gib: float
    """Peak resident memory of this process and its engines, all paths together."""
    roofs: dict[str, Any]
    paths: dict[str, PathRun] = field(repr=False, default_factory=dict)
    same_paths: bool = False
    """Both paths' engines would get identical arguments and environment: only one was run."""
    schedule: str = "interleaved"
    step_costs: StepCosts | None = None
    step_lengths: dict[int, float] = field(default_factory=dict)
    """Acceptance lengths the step costs' prediction uses (the probe's, where one is stored)."""
    variants: list[VariantRows] = field(default_factory=list)
    """The optimized path with other attention backends (``backend.bench.variants``)."""
    ablations: list[AblationRows] = field(default_factory=list)
    """The baseline with each part of the optimized path alone (``backend.bench.ablation``)."""
    batched_parity: dict[str, ParityReport] = field(default_factory=dict)
    """Batched workloads: the baseline's batched tokens against its own alone (``alone``)."""

    @classmethod
    def build(
        cls,
        source: ModelSource,
        settings: Settings,
        options: BenchOptions,
        roofs: Roofs,
        costs: ModelCosts,
        paths: dict[str, PathRun],
        peer: PeerRun | None,
        *,
        memory_gib: float = 0.0,
        same_paths: bool = False,
        schedule: str = "interleaved",
        remote: bool = False,
        step_costs: StepCosts | None = None,
        variants: tuple[dict[str, dict[str, list[WorkloadRun]]], dict[str, str]] = ({}, {}),
        ablations: tuple[list[Ablation], dict[str, dict[str, list[WorkloadRun]]], dict[str, str]] = (
            [],
            {},
            {},
        ),
    ) -> BenchReport:
        """``remote``: a path ran on a server, so this machine's roofs say nothing of it."""
        from backend.bench.roofs import bandwidth_roof_tokens_per_s, compute_roof_tokens_per_s

        compute_roof = None if remote else compute_roof_tokens_per_s(costs, roofs)
        bandwidth_roof = None if remote else bandwidth_roof_tokens_per_s(costs, roofs)
        base, opt = paths.get("baseline"), paths.get("optimized")
        rows: list[Row] = []
        parity: dict[str, ParityReport] = {}
        batched_parity: dict[str, ParityReport] = {}
        acceptance: dict[str, float | None] = {}
        for name in options.workloads:
            b = base.workloads.get(name, []) if base else []
            o = opt.workloads.get(name, []) if opt else []
            rows.extend(rows_for(name, b, o, peer, compute_roof, bandwidth_roof))
            alone = base.workloads.get(alone_name(name), []) if base else []
            if b and o:
                parity[name] = _parity_over(alone * len(o), o) if alone else _parity_over(b, o)
            if b and alone:
                batched_parity[name] = _parity_over(alone * len(b), b)
            acceptance[name] = acceptance_of(r for run in o for r in run.requests)
        peer_parity = _peer_parity(base, peer)
        meta = {**_meta(source, settings, options, costs), "schedule": schedule}
        roof_info = {
            **roofs.to_json(),
            "compute_roof_tokens_per_s": compute_roof,
            "bandwidth_roof_tokens_per_s": bandwidth_roof,
            "flops_per_token": costs.flops_per_token,
            "weight_bytes_per_token": costs.weight_bytes_per_token,
        }
        lengths = _probe_lengths(settings) if step_costs is not None else {}
        every = {**{name: run.workloads for name, run in paths.items()}, **variants[0]}
        tried = variant_rows(every, variants[1], options, _parity_over) if any(variants) else []
        found, ablated, failed = ablations
        parts = ablation_rows(found, {**every, **ablated}, failed, options) if found else []
        return cls(
            meta,
            rows,
            parity,
            peer_parity,
            acceptance,
            memory_gib,
            roof_info,
            paths,
            same_paths,
            schedule,
            step_costs,
            lengths,
            tried,
            parts,
            batched_parity,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "meta": self.meta,
            "roofs": self.roofs,
            "same_paths": self.same_paths,
            "same_paths_message": SAME_PATHS if self.same_paths else None,
            "rows": [r.to_json() for r in self.rows],
            "parity": {name: _parity_json(p) for name, p in self.parity.items()},
            "transformers_parity": {name: _parity_json(p) for name, p in self.peer_parity.items()},
            "baseline_batched_vs_alone": {name: _parity_json(p) for name, p in self.batched_parity.items()},
            "speculative_acceptance": self.acceptance,
            "peak_memory_gib": self.memory_gib,
            "step_costs": None if self.step_costs is None else self._step_costs_json(),
            "attention_variants": [variant.to_json() for variant in self.variants],
            "ablations": [part.to_json() for part in self.ablations],
            "paths": {
                name: {
                    "engine_args": _plain(run.engine_args),
                    "env": run.env,
                    "workloads": {w: [_workload_json(r) for r in reps] for w, reps in run.workloads.items()},
                }
                for name, run in self.paths.items()
            },
        }

    def to_markdown(self) -> str:
        flags = " ".join(self.meta["machine"].get("cpu_flags") or []) or "not known"
        reps, mode = self.meta["options"]["repetitions"], self.meta.get("mode", "fast")
        cpu = "" if self.meta.get("gpu") else f"CPU flags: {flags} · "
        title = (
            f"**{self.meta['model']}** · {self.meta['dtype']} · {self.meta['hardware']} · {cpu}"
            f"{self.meta.get('vllm_build', 'vLLM ?')} · {mode} mode"
        )
        costs = ""
        if self.step_costs is not None:
            from backend.bench.step_costs import step_costs_markdown

            costs = step_costs_markdown(self.step_costs, self.step_lengths, "the demo model")
        if not self.rows:
            return f"{title}\n\n{costs}"
        lines = [
            title,
            "",
            self._method_line(reps),
            "",
            f"| workload | metric | {peer_label(self.meta)} | baseline | optimized | speed-up "
            f"| parity, {mode} mode (requests · positions) | spec acceptance | of roof |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
        ]
        for row in self.rows:
            parity = self.parity.get(row.workload)
            shown = (
                f"{parity.identical_requests}/{len(parity.results)} · {parity.position_fraction:.1%}"
                if parity
                else "—"
            )
            accepted = self.acceptance.get(row.workload)
            best = row.optimized if row.optimized is not None else row.baseline
            of_roof = f"{best / row.roof:.0%}" if row.roof and best else ""
            optimized = "= baseline" if self.same_paths else figure(row.optimized_runs)
            lines.append(
                f"| {row.workload} | {row.metric} | {num(row.transformers)} | {figure(row.baseline_runs)} "
                f"| {optimized} | {self._speedup(row)} | {shown} "
                f"| {'' if accepted is None else f'{accepted:.0%}'} | {of_roof} |"
            )
        lines += ["", self._footer(), *alone_markdown(self.batched_parity, self.parity)]
        divergences = [
            f"- {workload} `{rid}`: {result.describe()}"
            for workload, report in self.parity.items()
            for rid, result in report.results
            if not result.identical
        ]
        if divergences:
            lines += [
                "",
                "First divergences (the baseline — alone, for a batched workload — vs optimized):",
                *divergences,
            ]
        lines += ablation_markdown(self.ablations)
        lines += variants_markdown(self.variants)
        if costs:
            lines += ["", costs.rstrip("\n")]
        return "\n".join(lines) + "\n"

    def _step_costs_json(self) -> dict[str, Any]:
        costs = self.step_costs
        if costs is None:
            return {}
        lengths = self.step_lengths
        return {
            **costs.to_json(),
            "acceptance_lengths": {str(k): v for k, v in lengths.items()},
            "implied_speedup_prediction": {str(k): costs.implied_speedup(k, v) for k, v in lengths.items()},
        }

    def _method_line(self, reps: int) -> str:
        if self.same_paths:
            return (
                f"{SAME_PATHS} (identical engine arguments and environment): one engine ran, "
                f"{reps} repetition(s); figures are medians (min–max)."
            )
        return (
            f"{reps} repetition(s), {self.schedule}; figures are medians (min–max); speed-up is the "
            "median of the per-repetition ratios (min–max), *within noise* where that range reaches 1.0."
        )

    def _speedup(self, row: Row) -> str:
        if self.same_paths:
            return "nothing applies"
        ratios = row.ratios
        if ratios.median is None:
            return "—"
        if len(ratios.values) < 2:
            return f"{ratios.median:.2f}x (one run: noisy)"
        noise = " *within noise*" if row.within_noise else ""
        return f"{ratios.median:.2f}x ({ratios.low:.2f}–{ratios.high:.2f}){noise}"

    def _footer(self) -> str:
        r = self.roofs
        memory = f"{self.memory_gib:.2f} GiB (this process and every engine it ran)"
        peer = ", ".join(f"{w} {p.summary()}" for w, p in self.peer_parity.items())
        if r.get("compute_roof_tokens_per_s") is None:
            servers = ", ".join(
                f"{name} on {run.engine_args['server']}"
                for name, run in self.paths.items()
                if run.engine_args.get("server")
            )
            return (
                f"On servers ({servers}): requests went over HTTP, so the figures include the "
                "network and the server's front end; this machine's roofs do not apply. "
                f"Peak memory here: {memory}."
            )
        where = "the card" if self.meta.get("gpu") else f"{r['threads']} thread(s)"
        if peer and self.meta.get("gpu"):
            peer = f"{peer} (transformers ran on the CPU, the baseline on the card: not a parity check)"
        return (
            f"Roofs on {where}: {r['flops_per_s'] / 1e9:,.0f} GFLOP/s ({_matmul_label(r)}) at "
            f"{r['flops_per_token'] / 1e9:.2f} GFLOP a token → "
            f"{r['compute_roof_tokens_per_s']:,.0f} tok/s compute roof (the cap); "
            f"{r['bytes_per_s'] / 1e9:.1f} GB/s → "
            f"{r['bandwidth_roof_tokens_per_s']:,.0f} tok/s bandwidth roof (weights read once per step). "
            f"Peak memory: {memory}." + (f" transformers vs baseline tokens: {peer}." if peer else "")
        )


def _probe_lengths(settings: Settings) -> dict[int, float]:
    """The demo model's measured acceptance lengths, where its probe choice is stored here."""
    from backend.bench.step_costs import measured_lengths
    from backend.engine.model.source import resolve
    from backend.engine.platform import on_gpu
    from backend.engine.speculation.choice import choice_key
    from backend.engine.speculation.kept import stored_choice

    try:
        demo = resolve("", demo=True)
    except GemmaChatError:
        return {}
    return measured_lengths(stored_choice(choice_key(demo, settings.engine, on_gpu())))


def _matmul_label(roofs: dict[str, Any]) -> str:
    used = roofs.get("matmul_dtype") or roofs["dtype"]
    if used == roofs["dtype"]:
        return f"{used} matmul"
    return f"{used} matmul: this CPU multiplies {roofs['dtype']} in {used}"


def _parity_over(base: list[WorkloadRun], opt: list[WorkloadRun]) -> ParityReport:
    """Every repetition's requests, baseline against optimized (ids name the repetition after the first)."""
    results = []
    for rep, (b, o) in enumerate(zip(base, opt, strict=False)):
        for rid, result in _parity(b.requests, o.requests).results:
            results.append((rid if rep == 0 else f"{rid} (repetition {rep + 1})", result))
    return ParityReport(tuple(results))


def _parity(base: tuple[RequestResult, ...], opt: tuple[RequestResult, ...]) -> ParityReport:
    by_id = {r.id: r for r in opt}
    return ParityReport(
        tuple((r.id, compare_tokens(r.token_ids, by_id[r.id].token_ids)) for r in base if r.id in by_id)
    )


def _peer_parity(base: PathRun | None, peer: PeerRun | None) -> dict[str, ParityReport]:
    if base is None or peer is None:
        return {}
    out: dict[str, ParityReport] = {}
    for name, result in (("throughput", peer.throughput), ("single", peer.single)):
        runs = base.workloads.get(name)
        if not runs or result is None:
            continue
        run = runs[0]
        pairs = zip(run.requests, result.token_ids, strict=False)
        out[name] = ParityReport(tuple((r.id, compare_tokens(r.token_ids, ids)) for r, ids in pairs))
    return out


def _parity_json(report: ParityReport) -> dict[str, Any]:
    return {
        "requests": len(report.results),
        "identical_requests": report.identical_requests,
        "request_fraction": report.request_fraction,
        "position_fraction": report.position_fraction,
        "divergences": [
            {
                "request": rid,
                "index": r.index,
                "token_a": r.token_a,
                "token_b": r.token_b,
                "describe": r.describe(),
            }
            for rid, r in report.results
            if not r.identical
        ],
    }


def _workload_json(run: WorkloadRun) -> dict[str, Any]:
    return {
        "wall_s": run.wall_s,
        "generated_tokens": run.generated,
        "aggregate_tokens_per_s": run.aggregate_tokens_per_s,
        "speculative_acceptance": run.acceptance,
        "requests": [
            {"id": r.id, "turn": r.turn, "tokens": len(r.token_ids), "figures": asdict(r.metrics)}
            for r in run.requests
        ],
    }


def _meta(
    source: ModelSource, settings: Settings, options: BenchOptions, costs: ModelCosts
) -> dict[str, Any]:
    from backend.bench.hardware import measured_on, this_card
    from backend.provenance import hardware, package_versions

    machine, versions = hardware(), package_versions()
    return {
        "model": source.name,
        "model_path": str(source.path),
        "drafter": str(source.drafter) if source.drafter else None,
        "dtype": costs.dtype,
        "effective_params": costs.effective_params,
        **measured_on(this_card(), machine, versions, settings.engine.exact),
        "machine": machine,
        "versions": {name.removesuffix("-cpu"): v for name, v in versions.items()},
        "options": {k: v for k, v in asdict(options).items() if k != "extra_args"},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
