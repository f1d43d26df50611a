"""The engine paths as immutable values: ``EnginePath`` (what a path is: baseline, optimized,
eager) and ``EngineConfig`` (what one engine of it is started with — vLLM arguments and process
environment, each with its reason). Built by ``backend.engine.paths.engine_args.engine_config``.

* ``baseline``: vLLM as it ships for this model on this hardware — the engine's own
  defaults (compilation, and CUDA graphs on a GPU), no speculative decoding.
* ``optimized``: what gemma-chat adds on top (see ``EnginePath.optimized``).
* ``eager``: the baseline without compilation, for diagnosis only (its kernels are not
  the baseline's, so no parity promise is made against it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from backend.engine.argument import Argument
from backend.engine.paths.compile_cache import with_graph_key
from backend.engine.speculation.first_start import DraftPlan

PathName = Literal["baseline", "optimized", "eager"]
PATH_NAMES: tuple[PathName, ...] = ("baseline", "optimized", "eager")
COMPARED: tuple[PathName, PathName] = ("baseline", "optimized")
"""The compared pair: compare mode (F3, ``ask --path compare``), bench, and the verdict between them."""


@dataclass(frozen=True)
class EnginePath:
    name: PathName
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
    def baseline(cls) -> EnginePath:
        return cls("baseline", "stock vLLM: the engine's defaults, no speculative decoding")

    @classmethod
    def optimized(cls) -> EnginePath:
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
    def eager(cls) -> EnginePath:
        return cls("eager", "baseline without torch.compile (diagnosis only)", enforce_eager=True)

    @classmethod
    def named(cls, name: str) -> EnginePath:
        if name not in PATH_NAMES:
            raise ValueError(f"unknown path {name!r}: choose one of {', '.join(PATH_NAMES)}")
        return getattr(cls, name)()


@dataclass(frozen=True)
class EngineConfig:
    """What one engine is started with: vLLM arguments and process environment, with reasons."""

    path: EnginePath
    args: dict[str, Argument] = field(default_factory=dict)
    env: dict[str, Argument] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """What shaped the arguments beyond them (a measured speculation choice)."""
    drafts: DraftPlan | None = None
    """How many drafts the running engine proposes is set at its start (CPU, speculation auto)."""

    def engine_kwargs(self) -> dict[str, Any]:
        """vLLM's arguments, with the key that keeps this engine's compiled graph its own
        (``backend.engine.paths.compile_cache``)."""
        return with_graph_key({name: arg.value for name, arg in self.args.items()}, self.env_values())

    def env_values(self) -> dict[str, str]:
        return {name: str(arg.value) for name, arg in self.env.items()}
