"""The bench's report: per workload, each path's figures, the speed-up, token parity (requests and
positions identical, first divergence of each differing request), speculative acceptance, peak
memory, the roofs — as JSON (everything) and as a Markdown table that pastes as is."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from backend.bench.workload_runs import RequestResult, WorkloadRun
from backend.chat.parity import ParityReport, compare_tokens

if TYPE_CHECKING:
    from backend.bench.model_costs import ModelCosts
    from backend.bench.options import BenchOptions
    from backend.bench.peer import PeerResult, PeerSingleResult
    from backend.bench.roofs import Roofs
    from backend.engine.model_source import ModelSource
    from backend.settings import Settings

SCHEMA_VERSION = 1


@dataclass
class PathRun:
    path: str
    workloads: dict[str, WorkloadRun]
    engine_args: dict[str, Any]
    env: dict[str, str]
    peak_memory_gib: float


@dataclass
class PeerRun:
    dtype: str
    threads: int
    throughput: PeerResult | None = None
    single: PeerSingleResult | None = None


@dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    unit: str
    baseline: float | None
    optimized: float | None
    higher_is_better: bool = True
    transformers: float | None = None
    roof: float | None = None
    """The machine's ceiling for this figure (tokens/s), if one applies."""

    @property
    def ratio(self) -> float | None:
        b, o = self.baseline, self.optimized
        if not b or not o:
            return None
        return o / b if self.higher_is_better else b / o


@dataclass
class BenchReport:
    meta: dict[str, Any]
    rows: list[Row]
    parity: dict[str, ParityReport]
    peer_parity: dict[str, ParityReport]
    acceptance: dict[str, float | None]
    memory_gib: dict[str, float]
    roofs: dict[str, Any]
    paths: dict[str, PathRun] = field(repr=False, default_factory=dict)

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
    ) -> BenchReport:
        from backend.bench.roofs import bandwidth_roof_tokens_per_s, compute_roof_tokens_per_s

        compute_roof = compute_roof_tokens_per_s(costs, roofs)
        bandwidth_roof = bandwidth_roof_tokens_per_s(costs, roofs)
        base, opt = paths.get("baseline"), paths.get("optimized")
        rows: list[Row] = []
        parity: dict[str, ParityReport] = {}
        acceptance: dict[str, float | None] = {}
        for name in options.workloads:
            b = base.workloads.get(name) if base else None
            o = opt.workloads.get(name) if opt else None
            rows.extend(_rows(name, b, o, peer, compute_roof, bandwidth_roof))
            if b and o:
                parity[name] = _parity(b.requests, o.requests)
            acceptance[name] = o.acceptance if o else None
        peer_parity = _peer_parity(base, peer)
        meta = _meta(source, settings, options, costs)
        roof_info = {
            **roofs.to_json(),
            "compute_roof_tokens_per_s": compute_roof,
            "bandwidth_roof_tokens_per_s": bandwidth_roof,
            "flops_per_token": costs.flops_per_token,
            "weight_bytes_per_token": costs.weight_bytes_per_token,
        }
        memory = {p: run.peak_memory_gib for p, run in paths.items()}
        return cls(meta, rows, parity, peer_parity, acceptance, memory, roof_info, paths)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "meta": self.meta,
            "roofs": self.roofs,
            "rows": [{**asdict(r), "ratio": r.ratio} for r in self.rows],
            "parity": {name: _parity_json(p) for name, p in self.parity.items()},
            "transformers_parity": {name: _parity_json(p) for name, p in self.peer_parity.items()},
            "speculative_acceptance": self.acceptance,
            "peak_memory_gib": self.memory_gib,
            "paths": {
                name: {
                    "engine_args": _plain(run.engine_args),
                    "env": run.env,
                    "workloads": {w: _workload_json(r) for w, r in run.workloads.items()},
                }
                for name, run in self.paths.items()
            },
        }

    def to_markdown(self) -> str:
        lines = [
            f"**{self.meta['model']}** · {self.meta['dtype']} · {self.meta['hardware']} · "
            f"roofs on {self.roofs['threads']} core(s) · vLLM {self.meta['versions'].get('vllm', '?')}",
            "",
            "| workload | metric | transformers | baseline | optimized | speed-up "
            "| parity (requests · positions) | spec acceptance | of roof |",
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
            lines.append(
                f"| {row.workload} | {row.metric} | {_num(row.transformers)} | {_num(row.baseline)} "
                f"| {_num(row.optimized)} | {_ratio(row.ratio)} | {shown} "
                f"| {'' if accepted is None else f'{accepted:.0%}'} | {of_roof} |"
            )
        lines += ["", self._footer()]
        divergences = [
            f"- {workload} `{rid}`: {result.describe()}"
            for workload, report in self.parity.items()
            for rid, result in report.results
            if not result.identical
        ]
        if divergences:
            lines += ["", "First divergences (baseline vs optimized):", *divergences]
        return "\n".join(lines) + "\n"

    def _footer(self) -> str:
        r = self.roofs
        memory = ", ".join(f"{p} {gib:.2f} GiB" for p, gib in self.memory_gib.items())
        peer = ", ".join(f"{w} {p.summary()}" for w, p in self.peer_parity.items())
        return (
            f"Roofs on {r['threads']} thread(s): {r['flops_per_s'] / 1e9:.0f} GFLOP/s "
            f"({_matmul_label(r)}) → "
            f"{r['compute_roof_tokens_per_s']:.0f} tok/s compute roof; {r['bytes_per_s'] / 1e9:.1f} GB/s → "
            f"{r['bandwidth_roof_tokens_per_s']:.0f} tok/s bandwidth roof (weights read once per step). "
            f"Peak memory: {memory}." + (f" transformers vs baseline tokens: {peer}." if peer else "")
        )


def _matmul_label(roofs: dict[str, Any]) -> str:
    used = roofs.get("matmul_dtype") or roofs["dtype"]
    if used == roofs["dtype"]:
        return f"{used} matmul"
    return f"{used} matmul: this CPU multiplies {roofs['dtype']} in {used}"


def _rows(
    name: str,
    b: WorkloadRun | None,
    o: WorkloadRun | None,
    peer: PeerRun | None,
    compute_roof: float,
    bandwidth_roof: float,
) -> list[Row]:
    def mean(run: WorkloadRun | None, read: Any, turns: str = "all") -> float | None:
        return run.mean(read, turns) if run else None

    def ttft_ms(r: RequestResult) -> float | None:
        return r.metrics.ttft_s * 1000 if r.metrics.ttft_s is not None else None

    def decode(r: RequestResult) -> float | None:
        return r.metrics.decode_tokens_per_s

    if name == "throughput":
        pt = peer.throughput.tokens_per_s if peer and peer.throughput else None
        agg = [run.aggregate_tokens_per_s if run else None for run in (b, o)]
        requests = len(b.requests) if b else len(o.requests) if o else 0
        return [
            Row(
                name, f"aggregate tok/s ({requests} at once)", "tok/s", agg[0], agg[1], True, pt, compute_roof
            )
        ]
    if name == "single":
        ps = peer.single if peer else None
        return [
            Row(
                name,
                "decode tok/s",
                "tok/s",
                mean(b, decode),
                mean(o, decode),
                True,
                ps.mean_decode_tokens_per_s if ps else None,
                bandwidth_roof,
            ),
            Row(
                name,
                "TTFT ms",
                "ms",
                mean(b, ttft_ms),
                mean(o, ttft_ms),
                False,
                ps.mean_ttft_s * 1000 if ps else None,
            ),
        ]
    if name == "chat":
        total = [run.wall_s if run else None for run in (b, o)]
        return [
            Row(
                name,
                "TTFT ms, first turns",
                "ms",
                mean(b, ttft_ms, "first"),
                mean(o, ttft_ms, "first"),
                False,
            ),
            Row(
                name,
                "TTFT ms, later turns",
                "ms",
                mean(b, ttft_ms, "later"),
                mean(o, ttft_ms, "later"),
                False,
            ),
            Row(name, "total s", "s", total[0], total[1], False),
        ]
    return [
        Row(name, "TTFT ms", "ms", mean(b, ttft_ms), mean(o, ttft_ms), False),
        Row(name, "decode tok/s", "tok/s", mean(b, decode), mean(o, decode), True),
    ]


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
        run = base.workloads.get(name)
        if run is None or result is None:
            continue
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
    from backend.provenance import hardware, package_versions

    machine = hardware()
    return {
        "model": source.name,
        "model_path": str(source.path),
        "drafter": str(source.drafter) if source.drafter else None,
        "dtype": costs.dtype,
        "effective_params": costs.effective_params,
        "hardware": f"{machine.get('cpu', machine['machine'])} ({machine['cpus']} cores)",
        "machine": machine,
        "versions": {name.removesuffix("-cpu"): v for name, v in package_versions().items()},
        "options": {k: v for k, v in asdict(options).items() if k != "extra_args"},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"
