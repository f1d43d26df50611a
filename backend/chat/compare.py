"""Compare mode's result: the two paths' replies, the speed-up, token parity, and what differed.

Where both paths were started with the same engine arguments and environment, nothing of the
optimized path applies on this machine: the result says so instead of printing a ratio, which
would only measure noise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from backend.config.switch_rules import DRAFT_SCHEDULE as DRAFT_SCHEDULE_ENV
from backend.config.switch_rules import LIVE_SPEC_METRICS as LIVE_SPEC_METRICS_ENV
from backend.config.switch_rules import NO_PREFILL_DRAFTS as NO_PREFILL_DRAFTS_ENV
from backend.config.switch_rules import ONE_CALL_STEP as ONE_CALL_STEP_ENV
from backend.config.switch_rules import ROW_EXACT as ROW_EXACT_ENV
from backend.config.switch_rules import SAMPLED_ROW_DRAFTS as SAMPLED_ROW_DRAFTS_ENV
from backend.config.switch_rules import UNI_WORKER as UNI_WORKER_ENV
from backend.engine.parity import SAME_PATHS, TokenParity
from backend.engine.paths.compile_cache import GRAPH_KEY
from backend.engine.protocol import EngineInfo, Finished
from backend.kernels.env import KERNEL_ENV, THREADS_ENV

ENV_LABELS = {
    f"env {KERNEL_ENV}": "bf16 linear kernel",
    f"env {ONE_CALL_STEP_ENV}": "one worker call per step",
    f"env {NO_PREFILL_DRAFTS_ENV}": "first token before drafts",
    f"env {SAMPLED_ROW_DRAFTS_ENV}": "drafter on sampled rows",
    f"env {UNI_WORKER_ENV}": "worker in the engine-core process",
    f"env {ROW_EXACT_ENV}": "row-exact verification",
}
"""What each of the optimized path's environment variables does, in the compare line's words."""


@dataclass(frozen=True)
class PathDifference:
    """One engine argument (or environment variable) the two paths were started with differently."""

    name: str
    baseline: Any
    optimized: Any
    measured: str = ""
    """What the optimized engine's start measured of it (its speculation's verdict), if anything."""

    def label(self) -> str:
        """Short and readable: what the optimized path does here."""
        value = self.optimized
        if self.measured:
            return self.measured.split(" (")[0] if not self.measured.startswith("no ") else "no speculation"
        if self.name == "speculative_config" and isinstance(value, dict):
            method = value.get("method") or "mtp"
            return f"{method} speculation ({value.get('num_speculative_tokens')} drafts)"
        if self.name in ENV_LABELS:
            return ENV_LABELS[self.name]
        if self.name == "where":
            return f"optimized {value}, baseline {self.baseline}"
        if value is None:
            return f"no {self.name}"
        return f"{self.name}={_short(value)}"


def _short(value: Any, limit: int = 24) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


HIDDEN = {
    "per_request_spec_decode_metrics",
    f"env {THREADS_ENV}",
    f"env {DRAFT_SCHEDULE_ENV}",
    f"env {LIVE_SPEC_METRICS_ENV}",
    "distributed_executor_backend",
}
"""Differences that only follow from another one (figures of speculation, the kernel's threads)."""


def path_differences(baseline: EngineInfo, optimized: EngineInfo) -> tuple[PathDifference, ...]:
    """Every engine argument and environment variable the two paths' engines differ in; where a
    path runs on a vLLM server (whose arguments are the server's), where each one runs."""
    servers = (baseline.engine_args.get("server"), optimized.engine_args.get("server"))
    if any(servers):
        where = tuple(f"on {url}" if url else "in process" for url in servers)
        return () if where[0] == where[1] else (PathDifference("where", where[0], where[1]),)
    found: list[PathDifference] = []
    for prefix, base, opt in (
        ("", baseline.engine_args, optimized.engine_args),
        ("env ", baseline.environment, optimized.environment),
    ):
        base, opt = _without_graph_key(base), _without_graph_key(opt)
        for key in sorted(set(base) | set(opt)):
            if base.get(key) != opt.get(key):
                measured = optimized.speculation if key == "speculative_config" else None
                found.append(PathDifference(prefix + key, base.get(key), opt.get(key), measured or ""))
    return tuple(found)


def _without_graph_key(args: dict[str, Any]) -> dict[str, Any]:
    """Engine arguments less the compile-cache key, which only follows from the variables that
    differ (and is shown by ``paths``); an ``additional_config`` left empty is dropped."""
    extra = args.get("additional_config")
    if not isinstance(extra, dict) or GRAPH_KEY not in extra:
        return args
    rest = {key: value for key, value in extra.items() if key != GRAPH_KEY}
    trimmed = {key: value for key, value in args.items() if key != "additional_config"}
    return {**trimmed, "additional_config": rest} if rest else trimmed


def kernel_mode(baseline: EngineInfo, optimized: EngineInfo) -> str:
    """On a GPU, whether both paths ran vLLM's batch-invariant kernels (``exact``): only then can a
    verifying step's sums match a plain step's. Nearly always, not always: vLLM 0.32's Triton 2D
    kernel rounds one query position in 64 past 512 tokens differently on the sliding layers, and on
    a B200 a step with several queries takes wider tiles (docs/gpu.md, "Exact tokens")."""
    if not all("gpu_memory_utilization" in info.engine_args for info in (baseline, optimized)):
        return ""
    if all(info.environment.get("VLLM_BATCH_INVARIANT") == "1" for info in (baseline, optimized)):
        return "exact mode (batch-invariant kernels on both paths)"
    return (
        "fast mode (a verifying step runs other kernels than a plain one, so bfloat16 tokens may differ "
        "on a GPU; exact = true in [engine] makes them match but for vLLM's known kernel limits, slower)"
    )


@dataclass(frozen=True)
class CompareResult:
    baseline: Finished
    optimized: Finished
    parity: TokenParity
    differences: tuple[PathDifference, ...] = ()
    mode: str = ""
    """Which kernels the GPU ran (``kernel_mode``); empty on a CPU."""

    @property
    def same_paths(self) -> bool:
        """True when both engines got identical arguments and environment."""
        return not self.differences

    @property
    def decode_speedup(self) -> float | None:
        base, opt = self.baseline.metrics.decode_tokens_per_s, self.optimized.metrics.decode_tokens_per_s
        return opt / base if base and opt and not self.same_paths else None

    @property
    def e2e_speedup(self) -> float | None:
        base, opt = self.baseline.metrics.e2e_s, self.optimized.metrics.e2e_s
        return base / opt if base and opt and not self.same_paths else None

    def differences_line(self) -> str:
        shown = [d.label() for d in self.differences if d.name not in HIDDEN]
        return f"optimized path here: {', '.join(shown)}" if shown else SAME_PATHS
