"""Run the speculation probe: one engine per candidate (none, MTP with 1..4 drafts, ngram), the
same prompts on each, the candidates taking turns prompt by prompt, in several rounds (a prompt's
rate on a candidate is the median of its rounds: one slow moment of the machine does not decide);
then choose.

Each candidate's greedy tokens (first round) are compared with no speculation's: a candidate that
changes any is reported and never chosen. Where vLLM runs Gemma 4 on Triton (GPUs without
FlashAttention 4), a second stage measures FlashAttention for the sliding layers with the chosen
speculation, against the same on vLLM's own attention, under the same rule.

Every probe engine runs with vLLM's per-iteration records on, so each candidate's decode steps
(drafted or not), the tokens they yielded and their duration are read from the engine rather
than inferred. Where free memory cannot hold all candidates at once they run one after another
(the choice then says so in the log). See ``backend.engine.speculation.choice`` for the choice.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from backend.config.settings import EngineSettings
from backend.engine.gpu import detect_gpu
from backend.engine.gpu_args import exact_attention, gpu_env
from backend.engine.gpu_attention import ModelAttention, attention_candidates
from backend.engine.model_source import ModelSource
from backend.engine.placement import plan_for
from backend.engine.platform import on_gpu, process_tree_rss, room_for_another
from backend.engine.profiles import Argument, EngineConfig, EngineProfile, engine_config
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.quiet import settle
from backend.engine.speculation.by_load import default_levels, with_drafts_by_load
from backend.engine.speculation.choice import (
    PROBE_DRAFTS,
    ProbeRun,
    SpeculationChoice,
    add_histogram,
    attention_label,
    candidate_label,
    choice_key,
    choose,
    choose_attention,
)
from backend.engine.speculation.kept import store_choice
from backend.engine.speculation.replies import final_reply
from backend.engine.stats import StepRecord
from backend.engine.vllm import VllmEngine
from backend.errors import GemmaChatError, problem_of
from backend.gemma4.messages import PromptRenderer

PROBE_LOG = "speculation-probe.log"
"""The file under the logs directory the probe's engines write to (their stderr is captured there)."""
PROBE_PROMPTS = 6
PROBE_TOKENS = 64
PROBE_ROUNDS = 3
"""Each prompt runs this many times on each candidate (rounds over all prompts, interleaved)."""
RECORDS_SETTLE_S = 0.1
"""The engine's last iteration record of a request reaches the stat logger just after its output."""
T = TypeVar("T")
PROBE_KV_CACHE_GIB = 1
"""The probe's requests are short: a small KV cache lets every candidate's engine stay up at once."""


def probe_profiles(
    source: ModelSource, drafts: Sequence[int] = range(1, PROBE_DRAFTS + 1)
) -> list[EngineProfile]:
    """No speculation, the MTP drafter (when the model has one) with each count in ``drafts``, and
    ngram with ``PROBE_DRAFTS``. All are the optimized path but for speculation (its CPU linear
    kernel included), so each is measured as that path would really run."""
    profiles = [EngineProfile("optimized", "probe: none")]
    if source.drafter is not None:
        profiles += [EngineProfile("optimized", "probe: MTP", "mtp", k) for k in drafts]
    profiles.append(EngineProfile("optimized", "probe: ngram", "ngram", PROBE_DRAFTS))
    return profiles


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


def _candidates(source: ModelSource, settings: EngineSettings, drafts: Sequence[int]) -> list[_Candidate]:
    """One engine config per candidate; on a GPU each with the optimized path's share of the
    memory plan (they then run one after another: see ``_measure``)."""
    found: list[_Candidate] = []
    small = settings.model_copy(
        update={"kv_cache_gib": min(settings.kv_cache_gib or PROBE_KV_CACHE_GIB, PROBE_KV_CACHE_GIB)}
    )
    plan = plan_for(source, settings) if on_gpu() else None
    for profile in probe_profiles(source, drafts):
        config = engine_config(profile, source, small, 1, plan)
        spec = config.args.get("speculative_config")
        method = "none" if spec is None else ("ngram" if spec.value.get("method") == "ngram" else "mtp")
        count = 0 if spec is None else int(spec.value["num_speculative_tokens"])
        if any((c.method, c.drafts) == (method, count) for c in found):
            continue  # the MTP candidates fell back to ngram (the drafter cannot run here)
        records = Argument(True, "the probe reads every engine step's duration and tokens")
        config = replace(config, args={**config.args, "enable_logging_iteration_details": records})
        found.append(_Candidate(method, count, source, config))
    return found


async def measure_speculation(
    source: ModelSource,
    settings: EngineSettings,
    log_dir: Path,
    say: Callable[[str], None],
    *,
    drafts: Sequence[int] = range(1, PROBE_DRAFTS + 1),
    prompts: int = PROBE_PROMPTS,
    rounds: int = PROBE_ROUNDS,
    store: bool = True,
    attention: Sequence[dict[str, object]] | None = None,
    load_levels: Sequence[int] | None = None,
) -> SpeculationChoice:
    """Probe this model on this machine, store the choice for the optimized path, and return it.

    Speculation first (every candidate on vLLM's attention); then, where vLLM runs Gemma 4 on
    Triton (``attention_candidates``; or ``attention`` given), each other ``attention_config`` with
    the chosen speculation. A candidate whose greedy tokens differ from no speculation's on vLLM's
    attention, on any prompt, is measured and reported but never chosen. Last, with drafts chosen,
    how they should fall as requests run at once (``by_load``; ``load_levels``: the levels, () for
    none, None for this machine's)."""
    renderer = PromptRenderer.for_model(str(source.path))
    sampling = SamplingSettings(max_tokens=PROBE_TOKENS, temperature=0.0, seed=0, ignore_eos=True)
    chosen = [p for p in parity_prompts(frozenset({"text"})) if not p.history][:prompts]
    requests = [p.request(renderer, sampling, tag="probe-") for p in chosen]
    candidates = _candidates(source, settings, drafts)
    await _measure(candidates, requests, rounds, log_dir, say)
    reference = candidates[0]
    if reference.failed:
        raise GemmaChatError(
            f"The speculation probe could not measure the engine without speculation: {reference.failed}",
            f"See {log_dir / PROBE_LOG}.",
        )
    if on_gpu() and not settings.exact:
        await _recheck_in_exact_mode(candidates, requests, settings, log_dir, say)
    runs = [c.run(reference) for c in candidates if not c.failed]
    choice = choose(runs[0], runs[1:])
    key = choice_key(source, settings, on_gpu())
    if store:  # kept now: a failure among the attention candidates below loses nothing
        store_choice(key, choice)
    others = list(probe_attention(source, settings, say) if attention is None else attention)
    base = next(c for c in candidates if (c.method, c.drafts) == (choice.method, choice.drafts))
    if others:
        tried = [_with_attention(base, config) for config in others]
        say(f"attention: {len(tried)} candidate(s) with {base.label}, against vLLM's own")
        await _measure(tried, requests, rounds, log_dir, say)
        measured = [c.run(reference) for c in tried if not c.failed]
        if measured:
            choice = choose_attention(choice, base.run(reference), measured)
            if store:
                store_choice(key, choice)
    levels = default_levels(base.config) if load_levels is None else tuple(load_levels)
    if choice.method != "none" and levels:
        loaded = _with_attention(base, json.loads(choice.attention)) if choice.attention else base
        log = log_dir / PROBE_LOG
        try:
            choice = await with_drafts_by_load(source, loaded.config, choice, levels, renderer, log, say)
        except Exception as error:  # the choice for one request stands; the estimates stay
            say(f"drafts by load: failed, the estimated thresholds stay — {problem_of(error)}")
        else:
            if store:
                store_choice(key, choice)
    return choice


async def _recheck_in_exact_mode(
    candidates: list[_Candidate],
    requests: list[EngineRequest],
    settings: EngineSettings,
    log_dir: Path,
    say: Callable[[str], None],
) -> None:
    """On a GPU in fast mode a verifying step runs other kernels than a plain step, so tokens may
    differ for that reason alone. Each candidate whose tokens differed runs the prompts again, with
    the reference, in exact mode (vLLM's batch-invariant kernels, Triton attention): where they
    then agree, the speculation kept the tokens and the candidate stays eligible (its speed is the
    fast mode's, as the user runs it); where they still differ, it is out."""
    reference, diverging = candidates[0], [c for c in candidates[1:] if not c.failed]
    diverging = [c for c in diverging if c.run(reference).diverged]
    if not diverging:
        return
    exact = settings.model_copy(update={"exact": True})
    invariant = {**gpu_env(exact)}
    attention = exact_attention(exact)
    rechecked = [
        replace(
            c,
            config=replace(
                c.config,
                env={**c.config.env, **invariant},
                args={**c.config.args, **({"attention_config": attention} if attention else {})},
            ),
            engine=None,
            outputs={},
            rates={},
            histogram=[],
            steps=[],
            tokens=0,
        )
        for c in [reference, *diverging]
    ]
    say(f"parity in exact mode: {', '.join(c.label for c in diverging)} and no speculation, again")
    await _measure(rechecked, requests, 1, log_dir, say)
    if rechecked[0].failed:
        say("parity in exact mode: no speculation failed there; the fast mode's tokens decide")
        return
    for original, again in zip(diverging, rechecked[1:], strict=True):
        original.exact_agrees = not again.failed and not again.run(rechecked[0]).diverged


def probe_attention(
    source: ModelSource, settings: EngineSettings, say: Callable[[str], None] = lambda _: None
) -> list[dict[str, object]]:
    """The ``attention_config`` values to measure beside vLLM's own: on a GPU where vLLM runs
    Gemma 4 on Triton, those that can start for this model here (``attention_candidates``; each
    left out is said with why); none elsewhere (a CPU has one attention backend; Hopper and
    Blackwell run one fast backend on every layer)."""
    if not on_gpu():
        return []
    gpu = detect_gpu()
    if gpu is None:
        return []
    candidates = attention_candidates(gpu.capability, ModelAttention.read(source.path))
    for config, why in candidates.left_out:
        say(f"attention: {attention_label(json.dumps(config))} left out — {why}")
    return list(candidates.others)


def _with_attention(base: _Candidate, attention: dict[str, object]) -> _Candidate:
    why = "the speculation probe's attention candidate"
    config = replace(base.config, args={**base.config.args, "attention_config": Argument(attention, why)})
    return _Candidate(
        base.method, base.drafts, base.source, config, attention=json.dumps(attention, sort_keys=True)
    )


async def _measure(
    candidates: list[_Candidate],
    requests: list[EngineRequest],
    rounds: int,
    log_dir: Path,
    say: Callable[[str], None],
) -> None:
    """All candidates up at once, taking turns per prompt (the order rotating, each run after a
    pause for the last one's engine to go quiet), ``rounds`` times over the prompts; one after
    another where free memory cannot hold them all. Every engine it started is shut down after."""
    try:
        started: list[tuple[_Candidate, VllmEngine]] = []
        before, footprint = process_tree_rss(), 0
        gpu = on_gpu()
        for index, candidate in enumerate(candidates):
            if gpu:
                break  # each candidate's engine takes the optimized path's whole share: one at a time
            if index == 1:
                footprint = process_tree_rss() - before
            if index >= 1 and not room_for_another(footprint)[0]:
                break
            say(f"starting the {candidate.label} engine ({index + 1} of {len(candidates)})")
            engine = await _isolated(candidate, say, _start(candidate, log_dir, requests[0]))
            if engine is not None:
                started.append((candidate, engine))
        else:
            for r in range(rounds):
                for i, request in enumerate(requests):
                    where = f"round {r + 1} of {rounds}, prompt {i + 1} of {len(requests)}"
                    say(f"{where}: every candidate, in turn")
                    for j in range(len(started)):
                        candidate, engine = started[(r + i + j) % len(started)]
                        if candidate.failed:
                            continue
                        await settle()  # the candidate that ran last has stopped looking at its ring
                        await _isolated(candidate, say, _decode(candidate, engine, request, r))
            return
        if gpu:
            say(
                "on a GPU each candidate gets the optimized path's share of the memory plan: "
                "one after another"
            )
        else:
            say("free memory cannot hold every candidate at once: measuring them one after another")
        for candidate in candidates:
            if candidate.failed:
                continue
            await _isolated(candidate, say, _one_candidate(candidate, requests, rounds, log_dir))
            if candidate.engine is not None:
                await candidate.engine.shutdown()
                candidate.engine = None
    finally:
        for candidate in candidates:
            if candidate.engine is not None:
                await candidate.engine.shutdown()
                candidate.engine = None


async def _one_candidate(
    candidate: _Candidate, requests: list[EngineRequest], rounds: int, log_dir: Path
) -> None:
    engine = candidate.engine or await _start(candidate, log_dir, requests[0])
    for r in range(rounds):
        for request in requests:
            await _decode(candidate, engine, request, r)


async def _isolated(candidate: _Candidate, say: Callable[[str], None], step: Awaitable[T]) -> T | None:
    """``step`` of one candidate; a failure marks it failed and is said (the others go on)."""
    try:
        return await step
    except Exception as error:  # any engine failure: the candidate is out, the probe goes on
        text = problem_of(error)
        candidate.failed = text
        say(f"{candidate.label}: failed, skipped — {text}")
        return None


async def _start(candidate: _Candidate, log_dir: Path, warm_up: EngineRequest) -> VllmEngine:
    """The candidate's engine, started and warmed up (kept on the candidate for the shutdown)."""
    engine = VllmEngine(candidate.source, candidate.config, log_path=log_dir / PROBE_LOG)
    candidate.engine = engine
    await engine.start()
    await _finished(engine, replace(warm_up, request_id=f"warm-up-{warm_up.request_id}"), candidate)
    return engine


async def _finished(engine: VllmEngine, request: EngineRequest, candidate: _Candidate) -> Finished:
    failed = f"The speculation probe's request failed on {candidate.label}"
    return await final_reply(engine, request, failed, "See its log.")


async def _decode(candidate: _Candidate, engine: VllmEngine, request: EngineRequest, round_: int) -> None:
    """One probe prompt on one candidate in one round: its decode rate, acceptance and engine steps."""
    engine.stats.steps.clear()
    final = await _finished(engine, replace(request, request_id=f"{request.request_id}-r{round_}"), candidate)
    if round_ == 0:
        candidate.outputs[request.request_id] = tuple(final.token_ids)
    await asyncio.sleep(RECORDS_SETTLE_S)
    candidate.steps.extend(engine.stats.steps)
    m = final.metrics
    candidate.rates.setdefault(request.request_id, []).append(m.decode_tokens_per_s or 0.0)
    candidate.tokens += max(0, m.generated_tokens - 1)
    add_histogram(candidate.histogram, m.acceptance_histogram)
