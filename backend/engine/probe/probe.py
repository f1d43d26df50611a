"""Run the speculation probe: one engine per candidate (none, MTP with 1..4 drafts, ngram), the
same prompts on each, the candidates taking turns prompt by prompt, in several rounds (a prompt's
rate on a candidate is the median of its rounds: one slow moment of the machine does not decide);
then choose.

Each candidate's greedy tokens (first round) are compared with no speculation's: a candidate that
changes any is reported and never chosen. On a GPU in fast mode that comparison is bitwise over
batch-variant kernels, so the stages that change drafts — speculation, drafts by load — re-check a
difference under batch-invariant kernels (``_recheck_in_exact_mode``, ``exact_config``) before
cutting for it. Where vLLM runs Gemma 4 on Triton (GPUs without FlashAttention 4), a second stage
measures the other attention backends with the chosen speculation, against the same on vLLM's own
attention: on speed, among those with the same greedy tokens, with no exact-mode re-check (its
reference runs Triton, a candidate its own kernels: they differ by the kernel alone,
``_say_attention_differences``); in exact mode it does not run (``attention_to_try``).

Every probe engine runs with vLLM's per-iteration records on, so each candidate's decode steps
(drafted or not), the tokens they yielded and their duration are read from the engine rather
than inferred. Where free memory cannot hold all candidates at once they run one after another
(the choice then says so in the log). See ``backend.engine.speculation.choice`` for the choice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.gpu.attention import ModelAttention, attention_candidates
from backend.engine.gpu.card import detect_gpu
from backend.engine.local.quiet import settle
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import engine_config
from backend.engine.paths.placement import plan_for
from backend.engine.platform import on_gpu, process_tree_rss, room_for_another
from backend.engine.probe.by_load import default_levels, with_drafts_by_load
from backend.engine.probe.candidates import (
    _Candidate,
    exact_config,
    in_exact_mode,
    probe_paths,
)
from backend.engine.prompt_sets import parity_prompts
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.engine.speculation.choice import (
    PROBE_DRAFTS,
    SpeculationChoice,
    add_histogram,
    attention_label,
    choice_key,
    choose,
    choose_attention,
)
from backend.engine.speculation.kept import store_choice
from backend.engine.speculation.replies import final_reply
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


def _candidates(source: ModelSource, settings: EngineSettings, drafts: Sequence[int]) -> list[_Candidate]:
    """One engine config per candidate; on a GPU each with the optimized path's share of the
    memory plan (they then run one after another: see ``_measure``)."""
    found: list[_Candidate] = []
    small = settings.model_copy(
        update={"kv_cache_gib": min(settings.kv_cache_gib or PROBE_KV_CACHE_GIB, PROBE_KV_CACHE_GIB)}
    )
    plan = plan_for(source, settings) if on_gpu() else None
    for path in probe_paths(source, drafts):
        config = engine_config(path, source, small, 1, plan)
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
    recheck = on_gpu() and not settings.exact
    if recheck:
        await _recheckin_exact_mode(reference, candidates[1:], requests, settings, log_dir, say)
    runs = [c.run(reference) for c in candidates if not c.failed]
    choice = choose(runs[0], runs[1:])
    key = choice_key(source, settings, on_gpu())
    if store:  # kept now: a failure among the attention candidates below loses nothing
        store_choice(key, choice)
    others = attention_to_try(source, settings, attention, say)
    base = next(c for c in candidates if (c.method, c.drafts) == (choice.method, choice.drafts))
    if others:
        tried = [_with_attention(base, config) for config in others]
        say(f"attention: {len(tried)} candidate(s) with {base.label}, against vLLM's own")
        await _measure(tried, requests, rounds, log_dir, say)
        _say_attention_differences(tried, reference, say)
        measured = [c.run(reference) for c in tried if not c.failed]
        if measured:
            choice = choose_attention(choice, base.run(reference), measured)
            if store:
                store_choice(key, choice)
    levels = default_levels(base.config) if load_levels is None else tuple(load_levels)
    if choice.method != "none" and levels:
        loaded = _with_attention(base, json.loads(choice.attention)) if choice.attention else base
        log = log_dir / PROBE_LOG
        exact = exact_config(loaded.config, settings) if recheck else None
        try:
            choice = await with_drafts_by_load(
                source, loaded.config, choice, levels, renderer, log, say, exact=exact
            )
        except Exception as error:  # the choice for one request stands; the estimates stay
            say(f"drafts by load: failed, the estimated thresholds stay — {problem_of(error)}")
        else:
            if store:
                store_choice(key, choice)
    return choice


async def _recheckin_exact_mode(
    reference: _Candidate,
    candidates: list[_Candidate],
    requests: list[EngineRequest],
    settings: EngineSettings,
    log_dir: Path,
    say: Callable[[str], None],
    exact_reference: _Candidate | None = None,
) -> _Candidate | None:
    """On a GPU in fast mode a verifying step runs other kernels than a plain step, and every
    kernel schedules its sums by batch shape, so tokens may differ for that reason alone. Each of
    ``candidates`` (speculation or attention) whose tokens differed from ``reference``'s runs the
    prompts again in exact mode (``exact_config``), beside the reference run there too: where they
    then agree, the difference was the kernels' and the candidate stays eligible (its speed is the
    fast mode's, as the user runs it); where they still differ, it is out. Returns the reference
    as run in exact mode, which a later stage passes back as ``exact_reference`` (run once)."""
    diverging = [c for c in candidates if not c.failed and c.run(reference).diverged]
    if not diverging:
        return exact_reference
    if exact_reference is not None and exact_reference.failed:
        say("parity in exact mode: no speculation failed there; the fast mode's tokens decide")
        return exact_reference
    rechecked = [in_exact_mode(c, settings) for c in diverging]
    labels = ", ".join(c.label for c in diverging)
    if exact_reference is None:
        exact_reference = in_exact_mode(reference, settings)
        say(f"parity in exact mode: {labels} and no speculation, again")
        await _measure([exact_reference, *rechecked], requests, 1, log_dir, say)
    else:
        say(f"parity in exact mode: {labels}, again (no speculation ran there already)")
        await _measure(rechecked, requests, 1, log_dir, say)
    if exact_reference.failed:
        say("parity in exact mode: no speculation failed there; the fast mode's tokens decide")
        return exact_reference
    for original, again in zip(diverging, rechecked, strict=True):
        original.exact_agrees = not again.failed and not again.run(exact_reference).diverged
    return exact_reference


def _say_attention_differences(
    tried: list[_Candidate], reference: _Candidate, say: Callable[[str], None]
) -> None:
    """The attention stage is judged on speed among candidates whose greedy tokens are vLLM's
    attention's; one that differs is out, and said. It is not re-checked in exact mode: there the
    reference runs Triton on every layer while the candidate keeps its own backend's
    batch-invariant kernels, so the two differ by the kernel alone and a re-check would decide by
    luck (2-3 engine starts each time). A difference may be only the kernel's rounding; the probe
    cannot tell, so it keeps vLLM's attention."""
    differing = [c.label for c in tried if not c.failed and c.run(reference).diverged]
    if differing:
        say(
            f"attention: {', '.join(differing)} gave other greedy tokens than vLLM's attention (possibly "
            "the kernel's rounding alone; exact mode cannot tell, its reference runs Triton): not chosen"
        )


def attention_to_try(
    source: ModelSource,
    settings: EngineSettings,
    given: Sequence[dict[str, object]] | None,
    say: Callable[[str], None],
) -> list[dict[str, object]]:
    """The attention stage's candidates: ``given``, else ``probe_attention``'s — none in exact mode.

    Exact mode promises the two paths' tokens are the same because they run the same
    batch-invariant kernels: compare's line says so from ``VLLM_BATCH_INVARIANT`` on both, and both
    get Triton on every layer (``exact_attention``). A measured backend applies to the optimized
    path alone, so the baseline would keep Triton while the optimized path ran another backend's
    sums (FlashAttention falls back to FA2; FlashInfer has no batch-invariant kernels at all): the
    promise would rest on six probe prompts, not on the kernels. So exact mode measures no other
    attention, as bench's attention rows do not (``backend.bench.variants.card_variants``)."""
    if settings.exact:
        if on_gpu():
            say("attention: none measured in exact mode — both paths keep Triton's batch-invariant kernels")
        return []
    return list(probe_attention(source, settings, say) if given is None else given)


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
