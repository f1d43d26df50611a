"""The speculative decoding each path's engine is started with: a path's method (the MTP
drafter, else ngram where it may stand in), the optimized path's choice — forced by settings,
decided at the first start on a CPU, measured by ``paths --measure`` or the default on a GPU —
and on a CPU the schedule that stops drafting above a few running requests."""

from __future__ import annotations

from typing import Any

from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.model.source import ModelSource
from backend.engine.paths.values import EnginePath
from backend.engine.speculation.choice import AUTO_MOST_DRAFTS, SpeculationChoice, choice_key
from backend.engine.speculation.first_start import DraftPlan
from backend.engine.speculation.kept import stored_choice

Speculative = tuple[dict[str, Any], str] | None
"""vLLM's ``speculative_config`` and why (None: no speculation)."""


def speculative(
    path: EnginePath, source: ModelSource, gpu: bool = False
) -> tuple[dict[str, Any], str] | None:
    if path.speculation == "none":
        return None
    if path.speculation == "mtp" and source.drafter is not None:
        spec = {"model": str(source.drafter), "num_speculative_tokens": path.num_speculative_tokens}
        return spec, f"MTP drafter {source.drafter.name}: exact, speeds up one request"
    if path.speculation == "mtp" and gpu:
        return None  # no silent ngram on a GPU: it turns async scheduling off, so can lose to the baseline
    # ngram asked for by name keeps its count; as the drafter's stand-in it drafts at least 4
    drafts = path.num_speculative_tokens
    spec = {
        "method": "ngram",
        "num_speculative_tokens": drafts if path.speculation == "ngram" else max(drafts, 4),
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 5,
    }
    why = "no MTP drafter for this model" if source.drafter is None else "the drafter cannot run here"
    return spec, f"ngram prompt lookup ({why}): exact, no extra weights"


def measured_speculative(
    choice: SpeculationChoice, source: ModelSource, gpu: bool = False
) -> tuple[dict[str, Any], str] | None:
    """The speculative config a measured choice stands for (None: measured slower than none)."""
    if choice.method == "none":
        return None
    measured = EnginePath("optimized", "measured", choice.method, choice.drafts)  # type: ignore[arg-type]
    spec = speculative(measured, source, gpu)
    if spec is None:
        return None
    config, why = spec
    return config, f"{why}; {choice.method} with {choice.drafts} drafts, measured fastest here"


def optimized_speculation(
    source: ModelSource, settings: EngineSettings, gpu: bool, cpu_env: dict[str, Argument] | None = None
) -> tuple[tuple[dict[str, Any], str] | None, tuple[str, ...], SpeculationChoice | None, DraftPlan | None]:
    """The optimized path's speculation: forced by settings; else on a CPU the most drafts the
    engine may propose, with the plan that sets how many it does (``DraftPlan``: decided at the
    first start, applied at every start); else on a GPU measured or the default. With the measured
    choice where there is one. ``cpu_env``: the CPU engine's ``optimized_cpu_env``, computed once."""
    if settings.speculation == "none":
        return None, ("speculation off (settings: speculation = none)",), None, None
    if settings.speculation != "auto":
        method = settings.speculation
        forced = EnginePath("optimized", "settings", method, settings.draft_tokens)
        return (
            speculative(forced, source, gpu),
            (f"speculation set in settings: {method} with {settings.draft_tokens} drafts",),
            None,
            None,
        )
    key = choice_key(source, settings, gpu, cpu_env)
    if not gpu:
        choice = stored_choice(key)
        drafter = "mtp" if source.drafter is not None else "ngram"
        if choice is not None and choice.method != "none":
            drafter = choice.method  # a full probe may have found ngram faster than the drafter
        most = max(AUTO_MOST_DRAFTS, choice.drafts if choice is not None else 0)
        plan = DraftPlan(drafter, most, key, CPU_SPECULATION_MAX_BATCH)
        spec = speculative(EnginePath("optimized", "auto", drafter, most), source, gpu)  # type: ignore[arg-type]
        note = (
            choice.verdict() + choice.by_load_text(figures=False) if choice is not None else FIRST_START_NOTE
        )
        return spec, (note,), choice, plan
    choice = stored_choice(key)
    if choice is not None:
        return measured_speculative(choice, source, gpu), (choice.describe(),), choice, None
    if source.drafter is None:
        return (
            None,
            (
                f"no speculation: {source.drafter_note or 'no MTP drafter for this model'}. ngram is not "
                "used in its place on a GPU (vLLM turns async scheduling off for it, so it can be slower "
                "than the baseline); speculation = ngram forces it",
            ),
            None,
            None,
        )
    default = EnginePath("optimized", "default", "mtp", settings.draft_tokens)
    return (
        speculative(default, source, gpu),
        (
            "speculation not measured for this model here: `gemma-chat paths --measure` picks it "
            "(and, on cards where vLLM runs Gemma 4 on Triton, the attention backend per layer kind)",
        ),
        None,
        None,
    )


FIRST_START_NOTE = (
    "speculation decided at this path's first start here: each number of drafts is measured on the "
    "started engine (bounded; in the app when idle, after answering without drafts), and the fastest "
    "that keeps the tokens and beats none is kept"
)


CPU_SPECULATION_MAX_BATCH = 4
"""On CPU a verification step costs about (draft tokens + 1) times a plain decode step once the batch
keeps the cores busy; measured with ``gemma-chat bench`` (bench size, 8 requests at once) a random
drafter halved aggregate throughput. Above this many running requests the optimized path decodes
without drafts (vLLM's dynamic speculative decoding schedule); tokens stay exact either way."""


def cpu_speculation_schedule(spec: dict[str, Any], planned: bool = False) -> list[list[int]]:
    """Drafts by running requests; ``planned``: none until the draft plan sets them (at start)."""
    k = 0 if planned else int(spec["num_speculative_tokens"])
    return [[1, CPU_SPECULATION_MAX_BATCH, k], [CPU_SPECULATION_MAX_BATCH + 1, 1 << 16, 0]]
