"""What one engine step costs at a model's real size, and the speed-up speculation would imply.

A step that verifies ``k`` drafts runs the target over ``1 + k`` rows of one request; a decode
step of ``1 + k`` requests runs it over ``1 + k`` rows too (the attention reads differ: one
request's context ``1 + k`` times against ``1 + k`` contexts once, small beside the weights at
short contexts). So the verifying step is measured as a decode step of ``1 + k`` concurrent
requests — on the engine, from vLLM's per-iteration records, with no drafter needed — and a
plain step as a decode step of one request. That is the measurement; the speed-up it implies at
a mean acceptance length ``L`` (tokens a verifying step yields, the bonus token included) is

    L x plain / verifying(k)

before the drafter's own passes (its ``k`` passes per step add to the verifying step). It is a
prediction, and the report labels it so.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.stats import StepRecord

STEP_ROWS = (1, 2, 3, 4, 5)
"""Rows per decode step: 1 (plain) and 1 + k for k = 1..4 drafts."""
LOAD_LEVELS = (2, 4, 8)
"""Requests at once for the drafts-by-load table: a step of ``n`` requests each verifying ``k``
drafts computes ``n x (1 + k)`` rows (``load_rows``)."""
MAX_DRAFTS = max(STEP_ROWS) - 1
DRAFT_COUNTS = range(1, MAX_DRAFTS + 1)


def load_rows(levels: Sequence[int] = LOAD_LEVELS) -> tuple[int, ...]:
    """Every step size the table needs: 1 + k, and ``n`` and ``n x (1 + k)`` for each level."""
    rows = set(STEP_ROWS)
    for n in levels:
        rows |= {n, *(n * (1 + k) for k in range(1, MAX_DRAFTS + 1))}
    return tuple(sorted(rows))


STEPS_PER_ROW = 8
RECORDS_SETTLE_S = 0.2


@dataclass(frozen=True)
class StepCosts:
    median_ms: dict[int, float]
    """Median decode-step time by rows in the step (1 = plain)."""
    steps: dict[int, int] = field(default_factory=dict)
    """Decode steps each median is taken over."""

    @property
    def plain_ms(self) -> float | None:
        return self.median_ms.get(1)

    def verifying_ms(self, drafts: int) -> float | None:
        return self.median_ms.get(1 + drafts)

    def break_even(self, requests: int, drafts: int) -> float | None:
        """The tokens a verifying step must yield per request for ``drafts`` to pay at ``requests``
        at once: a step of ``requests x (1 + drafts)`` rows over a plain step of ``requests``."""
        plain, verifying = self.median_ms.get(requests), self.median_ms.get(requests * (1 + drafts))
        return verifying / plain if plain and verifying else None

    def implied_speedup(self, drafts: int, acceptance_length: float) -> float | None:
        """``L x plain / verifying(k)``: a prediction, without the drafter's passes."""
        plain, verifying = self.plain_ms, self.verifying_ms(drafts)
        if not plain or not verifying:
            return None
        return acceptance_length * plain / verifying

    def to_json(self) -> dict[str, Any]:
        return {
            "median_step_ms_by_rows": {str(k): v for k, v in self.median_ms.items()},
            "decode_steps_by_rows": {str(k): v for k, v in self.steps.items()},
        }


async def measure_step_costs(
    engine: Any,
    prompt: str,
    say: Callable[[str], None] = lambda _stage: None,
    rows: Sequence[int] = STEP_ROWS,
    steps: int = STEPS_PER_ROW,
) -> StepCosts:
    """Decode-step times by rows on a started ``VllmEngine`` whose config has
    ``enable_logging_iteration_details`` on: for each count, that many requests at once."""
    medians: dict[int, float] = {}
    counts: dict[int, int] = {}
    for count in rows:
        say(f"decode steps of {count} row(s)")
        # many requests' prompts take several steps to prefill (STEP_WINDOW tokens a step), and
        # a request decodes from the step its prefill ends: enough tokens that all decode together
        staggered = -(-count * PROMPT_TOKENS_AT_MOST // STEP_WINDOW)
        tokens = steps + 2 + staggered
        sampling = SamplingSettings(max_tokens=tokens, temperature=0.0, seed=0, ignore_eos=True)
        engine.stats.steps.clear()
        requests = [EngineRequest(f"steps-{count}-{i}", prompt, sampling=sampling) for i in range(count)]
        finals = await asyncio.gather(*(_final(engine, r) for r in requests))
        await asyncio.sleep(RECORDS_SETTLE_S)
        if not all(isinstance(f, Finished) for f in finals):
            raise RuntimeError(f"a step-cost request failed: {finals}")
        recorded = [s for s in engine.stats.steps if _decode_of(s, count)]
        if recorded:
            medians[count] = statistics.median(s.elapsed_ms for s in recorded)
            counts[count] = len(recorded)
    return StepCosts(medians, counts)


def _decode_of(step: StepRecord, rows: int) -> bool:
    return step.is_decode and step.generation_requests == rows and step.generation_tokens == rows


async def _final(engine: Any, request: EngineRequest) -> Any:
    final = None
    async for event in engine.stream(request):
        final = event
    return final


ASSUMED_LENGTHS = (1.5, 2.0, 2.5, 3.0)
"""Acceptance lengths the prediction is shown at where no probe has measured any on this machine."""


def measured_lengths(choice: Any) -> dict[int, float]:
    """Mean tokens per verifying step by draft count, from a stored probe choice's MTP runs."""
    if choice is None:
        return {}
    return {run.drafts: run.tokens_per_step() for run in choice.runs if run.method == "mtp" and run.histogram}


def step_costs_markdown(costs: StepCosts, lengths: dict[int, float], measured_on: str) -> str:
    """The measured step times and the speed-up they imply, labelled as a prediction."""
    plain = costs.plain_ms
    if plain is None:
        return "Step costs: no plain decode step was recorded.\n"
    lines = [
        f"**Step costs** (decode steps measured on the engine; median of {costs.steps.get(1, 0)} plain "
        f"steps): plain step {plain:.1f} ms.",
        "",
        "| drafts k | verifying step (1 + k rows) | × plain | acceptance length L | implied speed-up "
        "(prediction) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for drafts in range(1, MAX_DRAFTS + 1):
        verifying = costs.verifying_ms(drafts)
        if verifying is None:
            continue
        for length in [lengths[drafts]] if drafts in lengths else ASSUMED_LENGTHS:
            implied = costs.implied_speedup(drafts, length)
            lines.append(
                f"| {drafts} | {verifying:.1f} ms | {verifying / plain:.2f} | {length:.2f} | {implied:.2f}x |"
            )
    source = (
        f"acceptance lengths measured by the probe on {measured_on}"
        if lengths
        else "acceptance lengths assumed (no probe choice stored on this machine: "
        "`gemma-chat paths --demo --measure` measures the demo's)"
    )
    lines += [
        "",
        f"Implied speed-up = L × plain ÷ verifying step, {source}; a verifying step is measured as a "
        "decode step of 1 + k concurrent requests whose linear layers compute each row as "
        "row-exact verification does (on a CPU), and the drafter's own k passes per step are not "
        "included. A prediction, not a measurement of speculation.",
    ]
    return "\n".join(lines + _by_load_lines(costs)) + "\n"


def _by_load_lines(costs: StepCosts) -> list[str]:
    """Drafts by load from the same steps: the acceptance length each count must reach to pay."""
    levels = [n for n in LOAD_LEVELS if costs.median_ms.get(n)]
    if not levels:
        return []
    lines = [
        "",
        "**Drafts by load** (the same engine, n requests at once; a step verifying k drafts for each "
        "computes n × (1 + k) rows): the tokens a step must yield per request for k drafts to pay, "
        "step of n × (1 + k) rows ÷ step of n rows. Drafts pay where the drafter's acceptance "
        "length is above it.",
        "",
        "| requests n | plain step (n rows) | " + " | ".join(f"k = {k}" for k in DRAFT_COUNTS) + " |",
        "| ---: | ---: | " + " | ".join("---:" for _ in range(MAX_DRAFTS)) + " |",
    ]
    for n in levels:
        cells = []
        for k in range(1, MAX_DRAFTS + 1):
            even = costs.break_even(n, k)
            cells.append(f"{even:.2f}" if even is not None else "–")
        lines.append(f"| {n} | {costs.median_ms[n]:.1f} ms | " + " | ".join(cells) + " |")
    return lines


STEP_KV_CACHE_GIB = 2
STEP_WINDOW = 512
"""Context window and tokens per step of the step-cost engine: vLLM's memory profile runs one
forward over this many tokens, whose logits alone take ``STEP_WINDOW x vocab x 4`` bytes
(8.6 GB at Gemma 4's 262144-token vocabulary and the usual 8192)."""
PROMPT_TOKENS_AT_MOST = 64
"""``STEP_PROMPT`` in the chat template is under this many tokens."""
STEP_PROMPT = "Explain, step by step, how a hash table handles collisions."


def verifying_env() -> dict[str, Any]:
    """On a CPU, the step-cost engine computes a step of 1 + k requests as a step verifying k
    drafts computes its linear layers: with row-exact verification (and its one-pass kernel where
    proven), every request's row as it would alone (``GEMMA_CHAT_ROW_EXACT=all``). Without it the
    table would time a batched matmul that verification never runs."""
    from backend.config.switch_rules import ROW_EXACT as ENV
    from backend.engine.argument import Argument
    from backend.engine.cpu.env import row_exact_env
    from backend.engine.platform import on_gpu

    env = row_exact_env()
    if on_gpu() or ENV not in env:
        return {}
    return {**env, ENV: Argument("all", "step costs: each request's rows as a verifying step computes them")}


async def run_step_costs(source: Any, settings: Any, options: Any, log_dir: Any, progress: Any) -> StepCosts:
    """The optimized path's engine without speculation (speculation is what is being predicted),
    text only, with vLLM's per-iteration records on; started, measured, shut down."""
    from dataclasses import replace

    from backend.bench.options import BENCH_LOG
    from backend.engine.local.vllm import VllmEngine
    from backend.engine.paths.engine_args import Argument, EnginePath, engine_config
    from backend.gemma4.messages import ChatMessage

    small = settings.engine.model_copy(
        update={"kv_cache_gib": min(settings.engine.kv_cache_gib or STEP_KV_CACHE_GIB, STEP_KV_CACHE_GIB)}
    )
    config = engine_config(EnginePath("optimized", "step costs"), source, small)
    records = Argument(True, "step costs: every engine step's duration and tokens")
    text_only = Argument(
        {"image": 0, "audio": 0, "video": 0},
        "step costs: text decoding only (no media towers loaded or profiled: less memory at full size)",
    )
    short = Argument(STEP_WINDOW, "step costs: short requests; a small profiling pass at a 262k vocabulary")
    args = {
        **config.args,
        **options.extra_args,
        "enable_logging_iteration_details": records,
        "limit_mm_per_prompt": text_only,
        "max_model_len": short,
        "max_num_batched_tokens": short,
    }
    config = replace(config, args=args, env={**config.env, **verifying_env()})
    engine = VllmEngine(source, config, log_path=log_dir / BENCH_LOG)
    stage = "step costs: starting the engine"
    progress(stage, 0, 1)
    try:
        await engine.start()
        progress(stage, 1, 1)
        prompt = engine.render([ChatMessage("user", STEP_PROMPT)]).text
        done = 0

        def say(_stage: str) -> None:
            nonlocal done
            progress("step costs: measuring", done, len(rows))
            done += 1

        rows = load_rows()
        costs = await measure_step_costs(engine, prompt, say, rows)
        progress("step costs: measuring", len(rows), len(rows))
        return costs
    finally:
        await engine.shutdown()
