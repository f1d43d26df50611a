"""The speculation probe's candidates: the engine paths it measures (no speculation, MTP with
1..4 drafts, ngram), each candidate's figures as they accumulate and as a ``ProbeRun``, and the
same candidate under exact mode's kernels for the parity re-check (``exact_config``: the one way
every stage of the probe — speculation, attention, drafts by load — re-checks a fast-mode
difference)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.gpu.args import exact_attention, gpu_env
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EngineConfig, EnginePath
from backend.engine.speculation.choice import PROBE_DRAFTS, ProbeRun, candidate_label
from backend.engine.stats import StepRecord

if TYPE_CHECKING:
    from backend.engine.local.vllm import VllmEngine


def probe_paths(source: ModelSource, drafts: Sequence[int] = range(1, PROBE_DRAFTS + 1)) -> list[EnginePath]:
    """No speculation, the MTP drafter (when the model has one) with each count in ``drafts``, and
    ngram with ``PROBE_DRAFTS``. All are the optimized path but for speculation (its CPU linear
    kernel included), so each is measured as that path would really run."""
    paths = [EnginePath("optimized", "probe: none")]
    if source.drafter is not None:
        paths += [EnginePath("optimized", "probe: MTP", "mtp", k) for k in drafts]
    paths.append(EnginePath("optimized", "probe: ngram", "ngram", PROBE_DRAFTS))
    return paths


@dataclass
class _Candidate:
    method: str
    drafts: int
    source: ModelSource
    config: EngineConfig
    engine: VllmEngine | None = None
    attention: str = ""
    """Its ``attention_config`` as JSON ("": vLLM's own choice)."""
    outputs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Each prompt's greedy tokens in the first round (keyed by its request id)."""
    rates: dict[str, list[float]] = field(default_factory=dict)
    """Decode rates per prompt (keyed by its request id), one a round."""
    histogram: list[int] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    tokens: int = 0
    """Tokens the decode steps yielded: every generated token but the first (prefill's)."""
    failed: str = ""
    """Why its engine could not start or answer ("": measured); a failed candidate is skipped."""
    exact_agrees: bool = False
    """Its tokens differed from the reference's in fast mode but agreed in exact mode (GPU)."""

    @property
    def label(self) -> str:
        return candidate_label(self.method, self.drafts) + (" + attention" if self.attention else "")

    def run(self, reference: _Candidate) -> ProbeRun:
        """Its figures; ``reference``'s tokens (no speculation, vLLM's attention) are parity's."""
        decode = [s for s in self.steps if s.is_decode]
        step_ms = statistics.median(s.elapsed_ms for s in decode) if decode else None
        diverged = tuple(
            i for i, rid in enumerate(reference.outputs) if self.outputs.get(rid) != reference.outputs[rid]
        )
        kernel_only, diverged = (diverged, ()) if self.exact_agrees else ((), diverged)
        return ProbeRun(
            self.method,
            self.drafts,
            tuple(statistics.median(rounds) for rounds in self.rates.values()),
            tuple(self.histogram),
            len(decode),
            self.tokens,
            step_ms,
            self.attention,
            diverged,
            kernel_only,
        )


def in_exact_mode(candidate: _Candidate, settings: EngineSettings) -> _Candidate:
    """A fresh copy of ``candidate`` to run on ``exact_config``'s engine (nothing measured yet)."""
    return replace(
        candidate,
        config=exact_config(candidate.config, settings),
        engine=None,
        outputs={},
        rates={},
        histogram=[],
        steps=[],
        tokens=0,
    )


def exact_config(config: EngineConfig, settings: EngineSettings) -> EngineConfig:
    """``config`` under exact mode's kernels: vLLM's batch-invariant mode and Triton attention on
    every layer, but for a layer kind the config itself sets (an attention candidate's
    ``backend_per_kind``: that backend's batch-invariant kernels are what is re-checked; one with
    none, FlashInfer, does not start and keeps its fast-mode verdict). The one way every stage of
    the probe — speculation, attention, drafts by load — re-checks a fast-mode difference."""
    exact = settings.model_copy(update={"exact": True})
    attention = exact_attention(exact)
    if attention is None:  # exact_attention answers for every setting with exact on
        raise RuntimeError("exact mode gave no attention config")
    own = config.args.get("attention_config")
    merged = {**attention.value, **(own.value if own is not None else {})}
    return replace(
        config,
        env={**config.env, **gpu_env(exact)},
        args={**config.args, "attention_config": Argument(merged, attention.reason)},
    )
