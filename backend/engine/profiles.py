"""Engine paths as immutable values, and the vLLM arguments each implies on this machine.

* ``baseline``: vLLM as it ships for this model on this hardware — the engine's own
  defaults (compilation, and CUDA graphs on a GPU), no speculative decoding.
* ``optimized``: what gemma-chat adds on top (see ``EngineProfile.optimized``).
* ``eager``: the baseline without compilation, for diagnosis only (its kernels are not
  the baseline's, so no parity promise is made against it).

``engine_config(profile, source, settings)`` returns the keyword arguments for vLLM's
``AsyncEngineArgs`` plus the environment the engine's processes need, each with the
reason it differs from vLLM's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from backend.compat.draft_schedule import ENV as DRAFT_SCHEDULE_ENV
from backend.compat.live_spec_metrics import ENV as LIVE_SPEC_METRICS_ENV
from backend.compat.uni_worker import ENV as UNI_WORKER_ENV
from backend.config.settings import EngineSettings
from backend.engine.argument import Argument
from backend.engine.compile_cache import with_graph_key
from backend.engine.cpu_env import optimized_cpu_env, speculating_cpu_env
from backend.engine.gpu import GpuRefused
from backend.engine.gpu_args import exact_attention, gpu_arguments, gpu_env
from backend.engine.gpu_batch import BATCHED_TOKENS, batch_limits, gpu_draft_schedule
from backend.engine.gpu_window import card_window
from backend.engine.kv_size import cpu_kv_cache, cpu_window
from backend.engine.memory_plan import MemoryPlan
from backend.engine.model_source import ModelSource
from backend.engine.platform import on_gpu
from backend.engine.speculation.choice import AUTO_MOST_DRAFTS, SpeculationChoice, choice_key
from backend.engine.speculation.first_start import DraftPlan
from backend.engine.speculation.kept import stored_choice

ProfileName = Literal["baseline", "optimized", "eager"]
PROFILE_NAMES: tuple[ProfileName, ...] = ("baseline", "optimized", "eager")


@dataclass(frozen=True)
class EngineProfile:
    name: ProfileName
    summary: str
    speculation: Literal["none", "mtp", "ngram"] = "none"
    num_speculative_tokens: int = 0
    enforce_eager: bool = False

    def __post_init__(self) -> None:
        if self.speculation == "none" and self.num_speculative_tokens:
            raise ValueError("num_speculative_tokens needs a speculation method")
        if self.speculation != "none" and not 1 <= self.num_speculative_tokens <= 8:
            raise ValueError(f"num_speculative_tokens must be 1..8, got {self.num_speculative_tokens}")

    @classmethod
    def baseline(cls) -> EngineProfile:
        return cls("baseline", "stock vLLM: the engine's defaults, no speculative decoding")

    @classmethod
    def optimized(cls) -> EngineProfile:
        return cls(
            "optimized",
            "gemma-chat's additions: speculative decoding where it pays (Gemma 4's MTP drafter; without "
            "one, ngram on a CPU and none on a GPU), and on a CPU an exact, faster bfloat16 linear "
            "kernel and the model worker inside the engine-core process (nothing spins between "
            "steps), one worker call per step",
            speculation="mtp",
            num_speculative_tokens=2,
        )

    @classmethod
    def eager(cls) -> EngineProfile:
        return cls("eager", "baseline without torch.compile (diagnosis only)", enforce_eager=True)

    @classmethod
    def named(cls, name: str) -> EngineProfile:
        if name not in PROFILE_NAMES:
            raise ValueError(f"unknown profile {name!r}: choose one of {', '.join(PROFILE_NAMES)}")
        return getattr(cls, name)()


@dataclass(frozen=True)
class EngineConfig:
    """What one engine is started with: vLLM arguments and process environment, with reasons."""

    profile: EngineProfile
    args: dict[str, Argument] = field(default_factory=dict)
    env: dict[str, Argument] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """What shaped the arguments beyond them (a measured speculation choice)."""
    drafts: DraftPlan | None = None
    """How many drafts the running engine proposes is set at its start (CPU, speculation auto)."""

    def engine_kwargs(self) -> dict[str, Any]:
        """vLLM's arguments, with the key that keeps this engine's compiled graph its own
        (``backend.engine.compile_cache``)."""
        return with_graph_key({name: arg.value for name, arg in self.args.items()}, self.env_values())

    def env_values(self) -> dict[str, str]:
        return {name: str(arg.value) for name, arg in self.env.items()}


def _speculative(
    profile: EngineProfile, source: ModelSource, gpu: bool = False
) -> tuple[dict[str, Any], str] | None:
    if profile.speculation == "none":
        return None
    if profile.speculation == "mtp" and source.drafter is not None:
        spec = {"model": str(source.drafter), "num_speculative_tokens": profile.num_speculative_tokens}
        return spec, f"MTP drafter {source.drafter.name}: exact, speeds up one request"
    if profile.speculation == "mtp" and gpu:
        return None  # no silent ngram on a GPU: it turns async scheduling off, so can lose to the baseline
    # ngram asked for by name keeps its count; as the drafter's stand-in it drafts at least 4
    drafts = profile.num_speculative_tokens
    spec = {
        "method": "ngram",
        "num_speculative_tokens": drafts if profile.speculation == "ngram" else max(drafts, 4),
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 5,
    }
    why = "no MTP drafter for this model" if source.drafter is None else "the drafter cannot run here"
    return spec, f"ngram prompt lookup ({why}): exact, no extra weights"


def _measured(
    choice: SpeculationChoice, source: ModelSource, gpu: bool = False
) -> tuple[dict[str, Any], str] | None:
    """The speculative config a measured choice stands for (None: measured slower than none)."""
    if choice.method == "none":
        return None
    measured = EngineProfile("optimized", "measured", choice.method, choice.drafts)  # type: ignore[arg-type]
    spec = _speculative(measured, source, gpu)
    if spec is None:
        return None
    config, why = spec
    return config, f"{why}; {choice.method} with {choice.drafts} drafts, measured fastest here"


def _optimized_speculation(
    source: ModelSource, settings: EngineSettings, gpu: bool
) -> tuple[tuple[dict[str, Any], str] | None, tuple[str, ...], SpeculationChoice | None, DraftPlan | None]:
    """The optimized path's speculation: forced by settings; else on a CPU the most drafts the
    engine may propose, with the plan that sets how many it does (``DraftPlan``: decided at the
    first start, applied at every start); else on a GPU measured or the default. With the measured
    choice where there is one."""
    if settings.speculation == "none":
        return None, ("speculation off (settings: speculation = none)",), None, None
    if settings.speculation != "auto":
        method = settings.speculation
        forced = EngineProfile("optimized", "settings", method, settings.draft_tokens)
        return (
            _speculative(forced, source, gpu),
            (f"speculation set in settings: {method} with {settings.draft_tokens} drafts",),
            None,
            None,
        )
    key = choice_key(source, settings, gpu)
    if not gpu:
        choice = stored_choice(key)
        drafter = "mtp" if source.drafter is not None else "ngram"
        if choice is not None and choice.method != "none":
            drafter = choice.method  # a full probe may have found ngram faster than the drafter
        most = max(AUTO_MOST_DRAFTS, choice.drafts if choice is not None else 0)
        plan = DraftPlan(drafter, most, key, CPU_SPECULATION_MAX_BATCH)
        spec = _speculative(EngineProfile("optimized", "auto", drafter, most), source, gpu)  # type: ignore[arg-type]
        note = (
            choice.verdict() + choice.by_load_text(figures=False) if choice is not None else FIRST_START_NOTE
        )
        return spec, (note,), choice, plan
    choice = stored_choice(key)
    if choice is not None:
        return _measured(choice, source, gpu), (choice.describe(),), choice, None
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
    default = EngineProfile("optimized", "default", "mtp", settings.draft_tokens)
    return (
        _speculative(default, source, gpu),
        (
            "speculation not measured for this model here: `gemma-chat profiles --measure` picks it "
            "(and, on cards where vLLM runs Gemma 4 on Triton, the attention backend per layer kind)",
        ),
        None,
        None,
    )


FIRST_START_NOTE = (
    "speculation decided at this path's first start here: each number of drafts is measured on the "
    "started engine (bounded), and the fastest that keeps the tokens and beats none is kept"
)


CPU_SPECULATION_MAX_BATCH = 4
"""On CPU a verification step costs about (draft tokens + 1) times a plain decode step once the batch
keeps the cores busy; measured with ``gemma-chat bench`` (bench size, 8 requests at once) a random
drafter halved aggregate throughput. Above this many running requests the optimized path decodes
without drafts (vLLM's dynamic speculative decoding schedule); tokens stay exact either way."""


def _cpu_speculation_schedule(spec: dict[str, Any], planned: bool = False) -> list[list[int]]:
    """Drafts by running requests; ``planned``: none until the draft plan sets them (at start)."""
    k = 0 if planned else int(spec["num_speculative_tokens"])
    return [[1, CPU_SPECULATION_MAX_BATCH, k], [CPU_SPECULATION_MAX_BATCH + 1, 1 << 16, 0]]


def engine_config(
    profile: EngineProfile,
    source: ModelSource,
    settings: EngineSettings,
    engines_sharing_gpu: int = 1,
    plan: MemoryPlan | None = None,
) -> EngineConfig:
    """``plan``: the GPU memory plan (this machine's or a described GPU's); it makes the arguments
    a GPU's, with this path's share, wherever they are computed."""
    gpu = plan is not None or on_gpu()
    if settings.exact and not gpu:
        raise GpuRefused(
            "exact = true needs a GPU: vLLM's batch-invariant mode launches Triton kernels, and the CPU "
            "build dies on the first request with it.",
            "Unset exact (on the CPU compare's tokens come from the same kernels on both paths anyway).",
        )
    args: dict[str, Argument] = {
        "model": Argument(str(source.path), "the resolved checkpoint directory"),
        "dtype": Argument(settings.dtype, "from settings (auto = the checkpoint's dtype)"),
        "seed": Argument(settings.seed, "fixed, so greedy runs repeat"),
        "disable_log_stats": Argument(False, "request metrics are read from the engine"),
        "limit_mm_per_prompt": Argument(
            {"image": 4, "audio": 2, "video": 1}, "bounds the memory vLLM plans for media"
        ),
    }
    if settings.max_model_len is not None:
        args["max_model_len"] = Argument(settings.max_model_len, "context window from settings")
    elif plan is not None:
        window = card_window(source.path, settings.dtype, plan)
        args["max_model_len"] = Argument(window.tokens, window.why)
    else:
        window_tokens = cpu_window(source.path, None)
        args["max_model_len"] = Argument(window_tokens, "context window chosen from this machine's memory")
    env: dict[str, Argument] = {}
    if plan is not None:
        args.update(gpu_arguments(plan, profile.name))
        env.update(gpu_env(settings))
        if profile.name == "optimized":
            limits = batch_limits(source.path, settings.dtype, plan, profile.name)
            args["max_num_seqs"] = Argument(limits.max_num_seqs, limits.why)
            args["max_num_batched_tokens"] = Argument(
                BATCHED_TOKENS,
                "tokens a step schedules: a burst of new requests prefills in fewer steps beside the "
                "decoding ones (vLLM's default is 2048; an estimate, not measured on a card)",
            )
    elif gpu:
        share = settings.gpu_memory_utilization / engines_sharing_gpu
        args["gpu_memory_utilization"] = Argument(
            round(share, 3), f"this engine's share of GPU memory (settings / {engines_sharing_gpu} engines)"
        )
        env.update(gpu_env(settings))
    else:
        args["kv_cache_memory_bytes"] = cpu_kv_cache(
            settings.kv_cache_gib,
            source.path,
            int(args["max_model_len"].value),
            settings.dtype,
            source.drafter,
        )
        args["skip_mm_profiling"] = Argument(
            True,
            "the start runs no image, audio or video through the encoders to size memory: the CPU "
            "engine's KV cache has a set size (measured: profiling a video took 67 s of a 2-minute "
            "warm start at E2B's size); the first media request runs the encoder then",
        )
    if profile.enforce_eager:
        args["enforce_eager"] = Argument(True, "no torch.compile (diagnosis profile)")
    exact = exact_attention(settings) if gpu else None
    if exact is not None:
        args["attention_config"] = exact
    notes: tuple[str, ...] = ()
    measured: SpeculationChoice | None = None
    if profile == EngineProfile.optimized():
        speculative, notes, measured, drafts = _optimized_speculation(source, settings, gpu)
        # exact mode keeps both paths on Triton's batch-invariant kernels (compare's line says so)
        if gpu and not settings.exact and measured is not None and (attention := measured.attention_config()):
            base = dict(exact.value) if exact is not None else {}
            args["attention_config"] = Argument(
                {**base, **attention},
                f"measured here with this speculation: {measured.attention_speedup:.2f}x over vLLM's own "
                "attention, the same greedy tokens (profiles --measure)",
            )
    else:
        speculative, drafts = _speculative(profile, source, gpu), None
    if speculative is None:
        drafts = None
    if speculative is not None:
        spec, why = speculative
        if plan is not None and profile.name == "optimized":
            schedule, schedule_why = gpu_draft_schedule(
                int(spec["num_speculative_tokens"]), int(args["max_num_seqs"].value), measured
            )
            spec = {**spec, "num_speculative_tokens_per_batch_size": schedule}
            why += schedule_why
            env[DRAFT_SCHEDULE_ENV] = Argument(
                1,
                "the number of drafts a step proposes can be set while the engine runs: "
                "`profiles --measure` measures drafts by load on this engine (drafts never change a token)",
            )
        if profile.name == "optimized":  # on a CPU and a GPU alike
            env[LIVE_SPEC_METRICS_ENV] = Argument(
                1,
                "each streamed output carries the engine's count of drafts and accepted drafts so far "
                "(vLLM sends it only with the finished reply): the footer shows acceptance while the "
                "reply streams",
            )
        if not gpu:
            schedule = _cpu_speculation_schedule(spec, drafts is not None)
            spec = {**spec, "num_speculative_tokens_per_batch_size": schedule}
            if drafts is not None and measured is not None and measured.by_load is not None:
                why += measured.by_load_text(figures=False)
            else:
                why += (
                    f"; off above {CPU_SPECULATION_MAX_BATCH} running requests (CPU is compute-bound there)"
                )
            if drafts is not None:
                why += (
                    f"; at most {drafts.most} drafts: how many a step proposes (0 to {drafts.most}) is "
                    "set on the running engine by what this path's first start here measured"
                )
            if profile.name == "optimized":
                env.update(speculating_cpu_env())
        args["speculative_config"] = Argument(spec, why)
        args["per_request_spec_decode_metrics"] = Argument(
            "detailed", "drafted/accepted per reply and per step (the accepted-draft view)"
        )
    if not gpu and profile.name == "optimized":
        cpu_env, cpu_notes = optimized_cpu_env(settings)
        env.update(cpu_env)
        notes = (*notes, *cpu_notes)
        if UNI_WORKER_ENV in cpu_env:
            args["distributed_executor_backend"] = Argument(
                "uni", "the worker inside the engine-core process (GEMMA_CHAT_UNI_WORKER, below)"
            )
    return EngineConfig(profile=profile, args=args, env=env, notes=notes, drafts=drafts)
