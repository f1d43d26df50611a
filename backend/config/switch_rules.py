"""Each ``GEMMA_CHAT_*`` switch's rule, in one place: the functions the app and the engine's
processes read the switches through, and ``check_environment``, which parses every one that is set
in the app's process before an engine starts (a value refused in vLLM's engine core could not be
shown). The rules' kinds are ``switches``' (flag, number, whole, choice); docs/configuration.md
lists them for users.

Not parsed here: ``GEMMA_CHAT_HOME``, ``GEMMA_CHAT_VENV`` and ``GEMMA_CHAT_SPECULATION_CHOICES``
(paths, any text), ``GEMMA_CHAT_CPU_LINEAR`` and ``GEMMA_CHAT_ROW_EXACT_KERNEL`` (paths the app
sets in an engine's environment),
``GEMMA_CHAT_OWNER`` (a process id the app sets for its children) and ``GEMMA_CHAT_TESTS_SERIAL``
(read by the test runner only)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from backend.config.switches import OFF_WORDS, check_all, choice, flag, number, raw, whole

ENGINE_BUILD = "GEMMA_CHAT_ENGINE_BUILD"
ENGINE_BUILDS = ("auto", "cpu", "cuda")
INSTALLER = "GEMMA_CHAT_INSTALLER"
INSTALLERS = ("auto", "uv", "pip")
"""The set-up's installer (app/installer.py parses it itself: it runs before anything is installed)."""
HOST_MEMORY = "GEMMA_CHAT_FORCE_HOST_MEMORY_GIB"
HOST_MEMORY_GIB = (1.0, 65536.0)
"""A forced RAM size: at least 1 GiB (the demo's engine alone needs more), at most 64 TiB."""
FORCE_LINEAR = "GEMMA_CHAT_FORCE_LINEAR"
LINEAR_FORCES = ("kernel", "torch", "onednn")
LINEAR_THREADS = "GEMMA_CHAT_CPU_LINEAR_THREADS"
LINEAR_MIN_WEIGHTS = "GEMMA_CHAT_CPU_LINEAR_MIN_WEIGHTS"
ROW_EXACT = "GEMMA_CHAT_ROW_EXACT"
ROW_EXACT_MODES = ("1", "all")
ROW_EXACT_ROWS = "GEMMA_CHAT_ROW_EXACT_ROWS"
FORCE_ROW_EXACT = "GEMMA_CHAT_FORCE_ROW_EXACT"
SLOW_STEP_MS = "GEMMA_CHAT_SLOW_STEP_MS"
SPECULATION_DECISION = "GEMMA_CHAT_FORCE_SPECULATION_DECISION"
SPECULATION_DECISIONS = ("rates", "steps")
EARLY_CORE = "GEMMA_CHAT_EARLY_CORE"
GRAPHICS = "GEMMA_CHAT_GRAPHICS"
GRAPHICS_KINDS = ("kitty", "halfblocks")
"""How the chat window draws pictures, where the terminal's detection is overridden."""
FLAGS = (
    "GEMMA_CHAT_NO_PREFILL_DRAFTS",
    "GEMMA_CHAT_ONE_CALL_STEP",
    "GEMMA_CHAT_SAMPLED_ROW_DRAFTS",
    "GEMMA_CHAT_UNI_WORKER",
    "GEMMA_CHAT_EAGER_EMBEDDING_PACK",
    "GEMMA_CHAT_MEMORY_TRACE",
    "GEMMA_CHAT_NO_MALLOC_TRIM",
    "GEMMA_CHAT_FULL_WARMUP",
    "GEMMA_CHAT_LIVE_SPEC_METRICS",
    "GEMMA_CHAT_DRAFT_SCHEDULE",
)
"""Switches that are on or off, off unless set (the optimized profile sets some of them to 1)."""


def engine_build() -> str:
    """``auto`` unless ``cpu`` or ``cuda`` is forced."""
    return choice(ENGINE_BUILD, ENGINE_BUILDS) or "auto"


def installer() -> str:
    """``auto`` unless ``uv`` or ``pip`` is forced."""
    return choice(INSTALLER, INSTALLERS) or "auto"


def host_memory_gib() -> float | None:
    """The RAM the host plan sees, forced (None: the machine's own)."""
    least, most = HOST_MEMORY_GIB
    value = number(HOST_MEMORY, 0.0, least=least, most=most, unit="GiB")
    return value or None


def forced_linear() -> str:
    """``kernel``, ``torch`` or ``onednn`` where forced, else ``""`` (the CPU decides)."""
    return choice(FORCE_LINEAR, LINEAR_FORCES)


def linear_threads() -> int:
    return whole(LINEAR_THREADS, 1, least=1, most=1024)


def linear_min_weights(default: int) -> int:
    return whole(LINEAR_MIN_WEIGHTS, default, least=0, most=1 << 40)


def row_exact_mode() -> str:
    """``1`` (verifying steps), ``all`` (every step of more than one row) or ``""`` (off)."""
    value = choice(ROW_EXACT, (*ROW_EXACT_MODES, *OFF_WORDS))
    return value if value in ROW_EXACT_MODES else ""


def row_exact_rows(default: int) -> int:
    return whole(ROW_EXACT_ROWS, default, least=2, most=4096)


ROW_BY_ROW = "rows"


def row_exact_forced_on() -> bool:
    """Row-exact verification where the optimized path speculates, unless turned off (``rows``:
    on, each verified row through vLLM's own matmul rather than the one-pass kernel)."""
    if raw(FORCE_ROW_EXACT).lower() == ROW_BY_ROW:
        return True
    return flag(FORCE_ROW_EXACT, default=True)


def row_exact_rows_only() -> bool:
    """``GEMMA_CHAT_FORCE_ROW_EXACT=rows``: no one-pass kernel (the row-by-row fallback, forced)."""
    return raw(FORCE_ROW_EXACT).lower() == ROW_BY_ROW


def slow_step_ms() -> float:
    return number(SLOW_STEP_MS, 0.0, least=0.0, most=600_000.0, unit="milliseconds")


def speculation_decision() -> str:
    """``rates`` or ``steps`` where forced, else ``""``."""
    return choice(SPECULATION_DECISION, SPECULATION_DECISIONS)


def graphics() -> str:
    """``kitty`` or ``halfblocks`` where forced, else ``""`` (the terminal is detected)."""
    return choice(GRAPHICS, GRAPHICS_KINDS)


def early_core() -> bool:
    """Whether the engine core is started early (on unless turned off)."""
    return flag(EARLY_CORE, default=True)


def on(name: str) -> bool:
    """One of ``FLAGS``."""
    return flag(name)


RULES: dict[str, Callable[[], object]] = {
    ENGINE_BUILD: engine_build,
    INSTALLER: installer,
    HOST_MEMORY: host_memory_gib,
    FORCE_LINEAR: forced_linear,
    LINEAR_THREADS: linear_threads,
    LINEAR_MIN_WEIGHTS: lambda: linear_min_weights(0),
    ROW_EXACT: row_exact_mode,
    ROW_EXACT_ROWS: lambda: row_exact_rows(2),
    FORCE_ROW_EXACT: row_exact_forced_on,
    SLOW_STEP_MS: slow_step_ms,
    SPECULATION_DECISION: speculation_decision,
    EARLY_CORE: early_core,
    GRAPHICS: graphics,
    **{name: partial(on, name) for name in FLAGS},
}
"""Every switch parsed, by name."""


def check_environment() -> None:
    """Parse every switch set in this process's environment: a refused one raises ``SwitchError``
    naming the variable, before any engine starts."""
    check_all(RULES)
