"""Choosing the optimized path's speculation by measurement: MTP drafter, ngram, or none, and how many drafts.

``gemma-chat paths --measure`` (and ``bench --measure-speculation``) start one engine of this
model per candidate — no speculation, the MTP drafter with 1 to ``PROBE_DRAFTS`` drafts, and
ngram prompt lookup with ``PROBE_DRAFTS`` — and decode the same prompts one at a time on each,
the candidates taking turns prompt by prompt (so drift on the machine falls on all alike). Each
candidate's decode rate is measured directly; nothing is predicted from a model of step cost.
Beside the rates the probe keeps what explains them, from the engine's own per-iteration
records: every decode step (vLLM's acceptance histogram counts only the steps that carried
drafts; with ngram most carry none), the tokens they yielded and their median duration.

A candidate wins if its greedy tokens are no speculation's on every prompt, the median of its
per-prompt ratios to no speculation is the highest, is at least ``MIN_GAIN``, and every prompt
agrees (the lowest ratio above 1.0); otherwise the optimized path does without speculation. An
attention candidate (``choose_attention``) is kept by the same rule against the chosen
speculation on vLLM's own attention. The result is kept per model, dtype, vLLM, CPU features, cores and
engine environment, and the ``optimized`` path uses it from then on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.engine.speculation.load_rule import describe_steps

if TYPE_CHECKING:
    from backend.config.settings import EngineSettings
    from backend.engine.argument import Argument
    from backend.engine.model.source import ModelSource

PROBE_DRAFTS = 4
AUTO_MOST_DRAFTS = PROBE_DRAFTS
"""The most drafts the optimized CPU engine is started with; how many it proposes is set at start."""
MIN_GAIN = 1.05
MIN_PAIRED = 3
"""A candidate needs at least this many prompts measured beside no speculation to be chosen."""
KEYED_ENV = (
    "VLLM_ENABLE_V1_MULTIPROCESSING",
    "VLLM_CPU_NUM_OF_RESERVED_CPU",
    "VLLM_CPU_OMP_THREADS_BIND",
    "OMP_NUM_THREADS",
)
"""Environment that changes how the engine runs, hence which speculation pays."""


@dataclass(frozen=True)
class ProbeRun:
    """One candidate's figures over the probe prompts."""

    method: str
    drafts: int
    rates: tuple[float, ...]
    """Decode tokens/s of each probe prompt, in prompt order (paired with the other candidates')."""
    histogram: tuple[int, ...] = ()
    """Drafted steps that accepted 0, 1, ... drafts (empty without speculation)."""
    decode_steps: int = 0
    """Every decode step the engine took, drafted or not (from its iteration records)."""
    decode_tokens: int = 0
    """Tokens those steps yielded."""
    step_ms: float | None = None
    """Median engine-core time of one decode step."""
    attention: str = ""
    """The ``attention_config`` it ran with, as JSON ("": vLLM's own choice for the card)."""
    diverged: tuple[int, ...] = ()
    """The probe prompts whose greedy tokens differ from no speculation's on vLLM's attention:
    a candidate with any may not be chosen (the optimized path promises the baseline's tokens)."""
    kernel_only: tuple[int, ...] = ()
    """On a GPU in fast mode: prompts whose tokens differed, but agreed when both ran vLLM's
    batch-invariant kernels — the kernels' difference, not the speculation's: still eligible."""

    @property
    def decode_tokens_per_s(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def undrafted_steps(self) -> int:
        return max(0, self.decode_steps - sum(self.histogram))

    def tokens_per_step(self, drafts: int | None = None) -> float:
        """Mean tokens a step yields, counting undrafted steps (1 token each)."""
        k = self.drafts if drafts is None else drafts
        return tokens_per_step(self.histogram, k, self.undrafted_steps)

    def position_acceptance(self) -> list[float]:
        """For each draft position, the share of drafted steps that accepted at least that many."""
        steps = sum(self.histogram)
        return [sum(self.histogram[j:]) / steps if steps else 0.0 for j in range(1, self.drafts + 1)]

    def label(self) -> str:
        label = candidate_label(self.method, self.drafts)
        return f"{label} + {attention_label(self.attention)}" if self.attention else label

    def describe(self) -> str:
        step = f", {self.step_ms:.1f} ms/step" if self.step_ms is not None else ""
        differs = (
            f", tokens differ on {len(self.diverged)} of {len(self.rates)} prompts: not eligible"
            if self.diverged
            else ""
        )
        if self.kernel_only:
            differs += (
                f", tokens differ on {len(self.kernel_only)} prompts in fast mode only "
                "(identical under batch-invariant kernels)"
            )
        if self.method == "none":
            return f"{self.label()} {self.decode_tokens_per_s:.0f} tok/s{step}{differs}"
        rates = "/".join(f"{rate:.0%}" for rate in self.position_acceptance())
        drafted = f"{sum(self.histogram)}/{self.decode_steps} steps drafted, " if self.decode_steps else ""
        return (
            f"{self.label()} {self.decode_tokens_per_s:.0f} tok/s{step}, "
            f"{drafted}{self.tokens_per_step():.2f} tokens/step (accepted {rates}){differs}"
        )


@dataclass(frozen=True)
class SpeculationChoice:
    method: str
    """``mtp``, ``ngram`` or ``none``."""
    drafts: int
    speedup: float
    """Median over the probe prompts of the winner's decode rate over no speculation's."""
    speedup_low: float
    speedup_high: float
    runs: tuple[ProbeRun, ...]
    attention: str = ""
    """The ``attention_config`` measured faster with that speculation, tokens unchanged, as JSON
    ("": vLLM's own choice; only GPUs where vLLM runs Gemma 4 on Triton have another candidate)."""
    attention_speedup: float = 1.0
    measured_by: str = "paths --measure"
    """``paths --measure`` (a full probe, one engine per candidate) or ``first start`` (each
    count of drafts on the optimized engine itself, within the first start's budget)."""
    reason: str = ""
    """Why no candidate could be chosen where that is not a measured figure (the budget ran out)."""
    by_load: tuple[tuple[int, int], ...] | None = None
    """Drafts a step by running requests, ``((up_to, drafts), ...)``, none above the last, as
    ``paths --measure`` measured them on the optimized engine (``by_load``); None: not measured
    (the path's estimated thresholds apply)."""
    load_figures: tuple[str, ...] = ()
    """Each measured level's figures, for ``paths``."""
    predicted: bool = False
    """``speedup`` is predicted from measured step costs and acceptance (a model too slow to time
    every count of drafts at a first start: ``step_decision``), not a measured decode rate."""

    def verdict(self) -> str:
        """One line for the status bar and ``paths``: ``MTP ×3, measured 1.31x here`` or
        ``no speculation: verifying 2 drafts costs 2.9× a plain step here, for 1.6 tokens``."""
        if self.method != "none" and self.predicted:
            label = f"{self.method.upper()} ×{self.drafts}"
            return f"{label}, predicted {self.speedup:.2f}x here ({self.measured_by})"
        if self.method != "none":
            return (
                f"{self.method.upper()} ×{self.drafts}, measured {self.speedup:.2f}x here "
                f"({self.speedup_low:.2f}–{self.speedup_high:.2f}; {self.measured_by})"
            )
        if self.reason:
            return f"no speculation: {self.reason}"
        plain = next((run for run in self.runs if run.method == "none"), None)
        tried = [run for run in self.runs if run.method != "none" and not run.attention]
        if plain is None or not tried:
            return f"no speculation: nothing to measure ({self.measured_by})"
        if all(run.diverged for run in tried):
            return f"no speculation: every candidate changed the tokens ({self.measured_by})"
        best = max(
            (run for run in tried if not run.diverged),
            key=lambda run: statistics.median(paired_speedups(plain, run) or [0.0]),
        )
        ratio = statistics.median(paired_speedups(plain, best) or [0.0])
        cost = step_cost(plain, best)
        drafts = f"{best.drafts} draft{'s' if best.drafts != 1 else ''}"
        costs = f"verifying {drafts} costs {cost:.1f}× a plain step here, " if cost else ""
        return (
            f"no speculation: {costs}for {best.tokens_per_step():.2f} tokens a step — "
            f"{best.label()} measured {ratio:.2f}x ({self.measured_by})"
        )

    def describe(self) -> str:
        figures = "; ".join(run.describe() for run in self.runs)
        if self.attention:
            attention = (
                f"; attention: {attention_label(self.attention)}, {self.attention_speedup:.2f}x on that"
            )
        elif any(run.attention for run in self.runs):
            attention = "; attention: vLLM's own (the other candidates were not faster with the same tokens)"
        else:
            attention = ""
        if self.method == "none":
            return (
                f"measured: none — no speculation beat plain decoding on every prompt{attention} ({figures})"
            )
        if self.reason:
            return f"measured: none — {self.reason} ({figures})"
        return (
            f"measured: {self.method} with {self.drafts} drafts, {self.speedup:.2f}x one request "
            f"({self.speedup_low:.2f}–{self.speedup_high:.2f} over the prompts){attention}"
            f"{self.by_load_text()} ({figures})"
        )

    def by_load_text(self, figures: bool = True) -> str:
        """``; by load (measured): 3 drafts up to 16 running requests, …`` ("" where not measured),
        with each level's figures unless ``figures`` is False."""
        if self.by_load is None:
            return ""
        shown = f" [{'; '.join(self.load_figures)}]" if figures and self.load_figures else ""
        return f"; by load (measured): {describe_steps(self.by_load)}{shown}"

    def attention_config(self) -> dict[str, Any] | None:
        """The measured ``attention_config`` for the optimized path (None: leave vLLM's choice)."""
        return json.loads(self.attention) if self.attention else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SpeculationChoice:
        runs = tuple(
            ProbeRun(
                **{
                    **run,
                    "rates": tuple(run["rates"]),
                    "histogram": tuple(run["histogram"]),
                    "diverged": tuple(run.get("diverged", ())),
                    "kernel_only": tuple(run.get("kernel_only", ())),
                }
            )
            for run in doc["runs"]
        )
        return cls(
            doc["method"],
            int(doc["drafts"]),
            float(doc["speedup"]),
            float(doc["speedup_low"]),
            float(doc["speedup_high"]),
            runs,
            str(doc.get("attention", "")),
            float(doc.get("attention_speedup", 1.0)),
            str(doc.get("measured_by", "paths --measure")),
            str(doc.get("reason", "")),
            _steps(doc.get("by_load")),
            tuple(str(line) for line in doc.get("load_figures", ())),
            bool(doc.get("predicted", False)),
        )


def _steps(doc: Any) -> tuple[tuple[int, int], ...] | None:
    """A stored by-load schedule: ``[[up_to, drafts], ...]``, ``up_to`` rising (``ValueError`` if not)."""
    if doc is None:
        return None
    steps = tuple((int(up_to), int(drafts)) for up_to, drafts in doc)
    if any(b[0] <= a[0] for a, b in itertools.pairwise(steps)) or any(
        up_to < 1 or drafts < 1 for up_to, drafts in steps
    ):
        raise ValueError(f"by_load {doc!r} is not a schedule of rising limits with drafts")
    return steps


def attention_label(attention: str) -> str:
    """How a choice names an ``attention_config`` (JSON): ``sliding_window on FLASH_ATTN``."""
    config = json.loads(attention) if attention else {}
    parts = [f"{kind} on {backend}" for kind, backend in sorted(config.get("backend_per_kind", {}).items())]
    if config.get("backend"):
        parts.insert(0, f"all layers on {config['backend']}")
    return ", ".join(parts) or "vLLM's attention"


def candidate_label(method: str, drafts: int) -> str:
    """``none``, ``mtp@2``, ``ngram@4``: how the probe names a candidate."""
    return "none" if method == "none" else f"{method}@{drafts}"


def tokens_per_step(histogram: tuple[int, ...], drafts: int, undrafted: int = 0) -> float:
    """Mean tokens a step yields with ``drafts`` drafts, from a histogram measured with at least as
    many; ``undrafted`` steps (no draft to verify: ngram found no match) yield one token each."""
    steps = sum(histogram) + undrafted
    if not steps or drafts == 0:
        return 1.0
    return 1 + sum(min(j, drafts) * count for j, count in enumerate(histogram)) / steps


def add_histogram(total: list[int], histogram: tuple[int, ...] | None) -> None:
    """Add one request's acceptance histogram into ``total`` (grown to its length)."""
    for j, count in enumerate(histogram or ()):
        total.extend([0] * (j + 1 - len(total)))
        total[j] += count


def step_cost(plain: ProbeRun, run: ProbeRun) -> float | None:
    """What one of ``run``'s decode steps costs in plain steps, from measured figures only: its
    tokens a step times plain decoding's rate over its own (time per token × tokens per step)."""
    ratio = statistics.median(paired_speedups(plain, run) or [0.0])
    return run.tokens_per_step() / ratio if ratio > 0 else None


def paired_speedups(plain: ProbeRun, run: ProbeRun) -> list[float]:
    """Per probe prompt: the candidate's decode rate over no speculation's."""
    return [r / p for p, r in zip(plain.rates, run.rates, strict=False) if p > 0 and r > 0]


def choose(plain: ProbeRun, speculative: list[ProbeRun]) -> SpeculationChoice:
    """The fastest measured candidate with no speculation's tokens, measured on at least
    ``MIN_PAIRED`` prompts, if it beats plain decoding by ``MIN_GAIN`` on the median and on every
    prompt; else ``none``."""
    best: tuple[str, int, float, float, float] = ("none", 0, 1.0, 1.0, 1.0)
    for run in speculative:
        if run.diverged:
            continue
        ratios = paired_speedups(plain, run)
        if len(ratios) < MIN_PAIRED:
            continue
        median = statistics.median(ratios)
        if median >= MIN_GAIN and min(ratios) > 1.0 and median > best[2]:
            best = (run.method, run.drafts, median, min(ratios), max(ratios))
    method, drafts, speedup, low, high = best
    return SpeculationChoice(
        method, drafts, round(speedup, 3), round(low, 3), round(high, 3), (plain, *speculative)
    )


def choose_attention(
    choice: SpeculationChoice, base: ProbeRun, candidates: list[ProbeRun]
) -> SpeculationChoice:
    """``choice`` with the fastest attention candidate (measured with the chosen speculation) that
    keeps the tokens and beats ``base`` — the same speculation on vLLM's attention — by ``MIN_GAIN``
    on the median and on every prompt; else vLLM's attention. Every candidate joins the runs."""
    best: tuple[str, float] = ("", 1.0)
    for run in candidates:
        ratios = paired_speedups(base, run)
        if run.diverged or not ratios:
            continue
        median = statistics.median(ratios)
        if median >= MIN_GAIN and min(ratios) > 1.0 and median > best[1]:
            best = (run.attention, round(median, 3))
    return replace(choice, runs=(*choice.runs, *candidates), attention=best[0], attention_speedup=best[1])


def _gpu_name() -> str:
    """The card a GPU choice was measured on (an L4's choice does not hold on an H100)."""
    try:
        from vllm.platforms import current_platform

        return f"gpu-{current_platform.get_device_name()}"
    except Exception:  # no device to ask: the choice is keyed on "a GPU"
        return "gpu"


def choice_key(
    source: ModelSource, settings: EngineSettings, gpu: bool, cpu_env: dict[str, Argument] | None = None
) -> str:
    """The model's and drafter's files (contents), dtype, exact mode, device, vLLM version, CPU
    features, cores, the optimized path's CPU environment (kernels, threads, how its drafter runs)
    and the process environment: a choice measured under others does not apply. ``cpu_env``: that
    environment where the caller has it (``optimized_cpu_env`` then runs once per start)."""
    from backend.config.switch_rules import ROW_EXACT_KERNEL as ONE_PASS
    from backend.engine.cpu.env import optimized_cpu_env, speculating_cpu_env
    from backend.provenance import cpu_flags

    parts: list[str] = [settings.dtype, _gpu_name() if gpu else f"cpu-{platform.machine()}", _vllm_version()]
    if settings.exact:  # batch-invariant kernels: other speeds, other tokens, another choice
        parts.append("exact")
    if not gpu:
        parts += [",".join(cpu_flags()), f"cores={os.cpu_count()}"]
        env = cpu_env if cpu_env is not None else optimized_cpu_env(settings)[0]
        parts += [f"{name}={arg.value}" for name, arg in env.items()]
        parts += [f"{name}={arg.value}" for name, arg in speculating_cpu_env(ONE_PASS in env).items()]
    parts += [f"{name}={os.environ.get(name, '')}" for name in KEYED_ENV]
    for role, directory in (("model", source.path), ("drafter", source.drafter)):
        if directory is None:
            parts.append(f"{role}: -")
            continue
        # The files' contents, not where they lie: a moved checkout or a fresh clone of the same
        # weights keeps its measurement.
        for name in [*sorted(p.name for p in directory.glob("*.safetensors")), "config.json"]:
            parts.append(f"{role}/{name}:{_fingerprint(directory / name)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _vllm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for name in ("vllm", "vllm-cpu"):
        try:
            return f"{name}-{version(name)}"
        except PackageNotFoundError:
            continue
    return "vllm-unknown"


def _fingerprint(path: Path) -> str:
    """Size and a hash of the last MiB (weights retrained to the same shapes differ there)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(0, size - (1 << 20)))
        return f"{size}:{hashlib.sha256(handle.read()).hexdigest()[:16]}"
