"""The engine interface the app talks to, and the events a turn produces.

An ``Engine`` starts once, then streams turns: ``stream(request)`` yields ``Started``,
any number of ``Delta`` and ``MetricsUpdate``, then exactly one of ``Finished``,
``Cancelled`` or ``Failed``. ``abort(request_id)`` cancels a turn; ``shutdown()`` ends
the engine and its child processes. The vLLM implementation is ``backend.engine.local.vllm``;
UI tests use a fake that emits the same events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from backend.engine.metrics import TurnMetrics
from backend.gemma4.messages import ChatMessage, RenderedPrompt


@dataclass(frozen=True)
class SamplingSettings:
    """How tokens are chosen. ``temperature == 0`` is greedy."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = 0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be 0 or more, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(frozen=True)
class EngineRequest:
    """One turn for the engine: the rendered prompt, its media and how to sample."""

    request_id: str
    prompt: str
    multi_modal_data: dict[str, Any] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    extra_args: dict[str, Any] = field(default_factory=dict)
    """Passed to vLLM's ``SamplingParams.extra_args`` (read by custom logits processors)."""
    final_only: bool = False
    """vLLM sends the request's one output when it finishes (``RequestOutputKind.FINAL_ONLY``), not
    each step's tokens: nothing streams (bench's throughput, where the app's per-token work would
    be measured instead of the engine's)."""


@dataclass(frozen=True)
class Started:
    request_id: str


@dataclass(frozen=True)
class Delta:
    request_id: str
    text: str
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class MetricsUpdate:
    request_id: str
    metrics: TurnMetrics


@dataclass(frozen=True)
class Finished:
    request_id: str
    text: str
    token_ids: tuple[int, ...]
    metrics: TurnMetrics
    finish_reason: str
    thought: str = ""
    """The reply's thinking, apart from ``text`` (set by the turn pipeline; an engine's own
    ``text`` is the raw decoded reply)."""


@dataclass(frozen=True)
class Cancelled:
    request_id: str
    text: str
    token_ids: tuple[int, ...]
    metrics: TurnMetrics
    thought: str = ""


FailureReason = Literal["rejected", "engine_died", "not_running", "error"]


@dataclass(frozen=True)
class Failed:
    request_id: str
    message: str
    reason: FailureReason = "error"
    """``engine_died``: the engine must be restarted before the next turn; ``rejected``: the
    engine refused this request (and keeps running); ``not_running``: it was never started."""

    @property
    def engine_died(self) -> bool:
        return self.reason == "engine_died"


TurnEvent = Started | Delta | MetricsUpdate | Finished | Cancelled | Failed
ProgressCallback = Callable[[str], None]


@dataclass(frozen=True)
class EngineInfo:
    """What a started engine can do, for the UI and for validation before sending."""

    model: str
    max_model_len: int
    modalities: frozenset[str]
    engine_args: dict[str, Any]
    environment: dict[str, str] = field(default_factory=dict)
    """Environment variables the engine's processes were started with (beyond the user's own)."""
    start_note: str | None = None
    """What the start did beyond the ordinary, for the user (a cached compiled graph set aside)."""
    speculation: str | None = None
    """The speculation this engine runs with and why, in one line (None: not decided by measurement)."""


class RendersPrompts(Protocol):
    """What renders a path's prompts and reads its tokens: the engine (its model's template and
    tokenizer), travelling with the handle as ``PathEngine.prompts``."""

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        """The prompt for ``messages`` in the model's chat template (after ``start``), with
        ``tools`` (OpenAI-style declarations) declared in the system turn; ``think`` turns on
        the model's thinking mode."""
        ...

    def decode(self, token_ids: list[int]) -> str:
        """Text of ``token_ids``, special tokens kept (for parity verdicts)."""
        ...


class Engine(RendersPrompts, Protocol):
    """What the app needs from an engine."""

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo: ...

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]: ...

    async def abort(self, request_id: str) -> None: ...

    async def shutdown(self) -> None: ...


@dataclass(frozen=True)
class PathEngine:
    """A started engine of one path, with what it said about itself when it started."""

    name: str
    engine: Engine
    info: EngineInfo
    renderer: RendersPrompts | None = None
    """The engine behind ``engine`` where that is a wrapper (swap mode's ``ResidentEngine``): the
    pipeline renders with it and asks it of its tokenizer, so the wrapper forwards only requests."""

    @property
    def prompts(self) -> RendersPrompts:
        """What renders this path's prompts, decodes its tokens and (a server) says how it tokenizes."""
        return self.renderer if self.renderer is not None else self.engine
