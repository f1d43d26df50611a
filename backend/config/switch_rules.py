"""Every ``GEMMA_CHAT_*`` switch that is not a setting, declared once: ``SWITCHES`` (the model is
vLLM's ``vllm/envs.py``) gives each its kind, its default, its meaning and its rule, and the
functions below are how the app and the engine's processes read them. ``check_environment``
parses every one that is set in the app's process before an engine starts (a value refused in
vLLM's engine core could not be shown). The rules' kinds are ``switches``' (flag, number, whole,
choice; ``text`` for paths and ids, which are not parsed); docs/configuration.md lists every
switch by kind, and a test checks that the two lists and the source agree.

The kinds: ``set-up`` (where things are kept, which build is installed), ``wire`` (set by the app
in an engine's environment; a user sets them only to try one fix alone), ``force`` (a decision the
machine makes, made by hand), ``diagnosis`` (turn a fix off, or say more, to measure it) and
``test`` (the tests' own). ``app/bootstrap.py`` (standard library only, run before anything is
installed) reads its two itself; they are declared here all the same."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from backend.config.switches import OFF_WORDS, check_all, choice, flag, number, raw, whole

Kind = Literal["set-up", "wire", "force", "diagnosis", "test"]
KINDS: tuple[Kind, ...] = ("set-up", "wire", "force", "diagnosis", "test")

HOME = "GEMMA_CHAT_HOME"
KERNELS_DIR = "GEMMA_CHAT_KERNELS_DIR"
VENV = "GEMMA_CHAT_VENV"
ENGINE_BUILD = "GEMMA_CHAT_ENGINE_BUILD"
ENGINE_BUILDS = ("auto", "cpu", "cuda")
INSTALLER = "GEMMA_CHAT_INSTALLER"
INSTALLERS = ("auto", "uv", "pip")
"""The set-up's installer (app/installer.py parses it itself: it runs before anything is installed)."""
SPECULATION_CHOICES = "GEMMA_CHAT_SPECULATION_CHOICES"
CPU_LINEAR = "GEMMA_CHAT_CPU_LINEAR"
ROW_EXACT_KERNEL = "GEMMA_CHAT_ROW_EXACT_KERNEL"
OWNER = "GEMMA_CHAT_OWNER"
UNI_WORKER = "GEMMA_CHAT_UNI_WORKER"
ONE_CALL_STEP = "GEMMA_CHAT_ONE_CALL_STEP"
NO_PREFILL_DRAFTS = "GEMMA_CHAT_NO_PREFILL_DRAFTS"
SAMPLED_ROW_DRAFTS = "GEMMA_CHAT_SAMPLED_ROW_DRAFTS"
LIVE_SPEC_METRICS = "GEMMA_CHAT_LIVE_SPEC_METRICS"
DRAFT_SCHEDULE = "GEMMA_CHAT_DRAFT_SCHEDULE"
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
MEMORY_TRACE = "GEMMA_CHAT_MEMORY_TRACE"
NO_MALLOC_TRIM = "GEMMA_CHAT_NO_MALLOC_TRIM"
EAGER_EMBEDDING_PACK = "GEMMA_CHAT_EAGER_EMBEDDING_PACK"
FULL_WARMUP = "GEMMA_CHAT_FULL_WARMUP"
TESTS_SERIAL = "GEMMA_CHAT_TESTS_SERIAL"
FLAGS = (
    NO_PREFILL_DRAFTS,
    ONE_CALL_STEP,
    SAMPLED_ROW_DRAFTS,
    UNI_WORKER,
    EAGER_EMBEDDING_PACK,
    MEMORY_TRACE,
    NO_MALLOC_TRIM,
    FULL_WARMUP,
    LIVE_SPEC_METRICS,
    DRAFT_SCHEDULE,
)
"""Switches that are on or off, off unless set (the optimized path sets some of them to 1)."""


def text(name: str) -> str:
    """A switch that is a path or an id: its value as set (``""`` when unset); never refused."""
    return os.environ.get(name, "")


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


@dataclass(frozen=True)
class Switch:
    """One ``GEMMA_CHAT_*`` variable: what it is for, and how it is read."""

    name: str
    kind: Kind
    default: str
    """What holds when it is unset, in words."""
    meaning: str
    read: Callable[[], object]
    """Its rule: the parsed value, or ``SwitchError`` naming the variable."""
    parsed: bool = True
    """False for paths and ids (``text``): any value is taken, so ``check_environment`` skips it."""


def _text(name: str, kind: Kind, default: str, meaning: str) -> Switch:
    return Switch(name, kind, default, meaning, partial(text, name), parsed=False)


def _flag(name: str, kind: Kind, meaning: str) -> Switch:
    return Switch(name, kind, "off", meaning, partial(on, name))


SWITCHES: tuple[Switch, ...] = (
    _text(HOME, "set-up", "the platform's folders", "config, data and cache all under one folder"),
    _text(
        KERNELS_DIR,
        "set-up",
        "the cache folder's kernels/",
        "the compiled kernels' folder: homes that share one compile each kernel once (the tests' do)",
    ),
    _text(VENV, "set-up", ".venv beside the README", "`python3 -m app`: the environment's folder"),
    Switch(ENGINE_BUILD, "set-up", "auto", "`python3 -m app`: the vLLM build to install", engine_build),
    Switch(
        INSTALLER,
        "set-up",
        "auto",
        "`python3 -m app`: install with uv or pip (auto: uv, pip if it fails)",
        installer,
    ),
    _text(SPECULATION_CHOICES, "set-up", "the cache folder's file", "where speculation choices are kept"),
    _text(CPU_LINEAR, "wire", "unset", "the compiled bfloat16 linear kernel an engine loads"),
    _text(ROW_EXACT_KERNEL, "wire", "unset", "the compiled one-pass row-exact kernel an engine loads"),
    _text(OWNER, "wire", "unset", "the gemma-chat process whose end ends its children"),
    Switch(LINEAR_THREADS, "wire", "1", "the bfloat16 kernel's threads (1 to 1024)", linear_threads),
    Switch(
        ROW_EXACT, "wire", "off", "row-exact linears: `1` verifying steps, `all` every step", row_exact_mode
    ),
    _flag(UNI_WORKER, "wire", "the CPU engine's worker computes inside the engine-core process"),
    _flag(ONE_CALL_STEP, "wire", "a decode step is one call from the engine core to its worker"),
    _flag(NO_PREFILL_DRAFTS, "wire", "a step of prefills, or one asking for no drafts, runs no drafter"),
    _flag(SAMPLED_ROW_DRAFTS, "wire", "the drafter's first pass computes only the rows it samples"),
    _flag(LIVE_SPEC_METRICS, "wire", "draft counts reach the app while a reply streams"),
    _flag(DRAFT_SCHEDULE, "wire", "the drafts per step can be changed while the engine runs"),
    Switch(FORCE_LINEAR, "force", "the CPU decides", "the bfloat16 linear decision", forced_linear),
    Switch(HOST_MEMORY, "force", "this machine's RAM", "the RAM the host plan sees (GiB)", host_memory_gib),
    Switch(SPECULATION_DECISION, "force", "by speed", "how the first start decides", speculation_decision),
    Switch(
        FORCE_ROW_EXACT, "force", "on", "`off`: no row-exact linears; `rows`: no kernel", row_exact_forced_on
    ),
    Switch(EARLY_CORE, "force", "on", "the engine core's interpreter started early (CPU build)", early_core),
    Switch(GRAPHICS, "force", "detected", "how attached pictures are drawn: kitty or halfblocks", graphics),
    Switch(
        LINEAR_MIN_WEIGHTS,
        "diagnosis",
        "by kernel",
        "the smallest layer the kernel computes",
        lambda: linear_min_weights(0),
    ),
    Switch(
        ROW_EXACT_ROWS,
        "diagnosis",
        "9",
        "the most rows row-exact checks (2 to 4096)",
        lambda: row_exact_rows(2),
    ),
    _flag(FULL_WARMUP, "diagnosis", "vLLM's own warm-up pass instead of the short one"),
    _flag(MEMORY_TRACE, "diagnosis", "each engine logs its memory after every start stage"),
    _flag(EAGER_EMBEDDING_PACK, "diagnosis", "every embedding table packed at load (the fix off)"),
    _flag(NO_MALLOC_TRIM, "diagnosis", "freed start memory kept (the fix off)"),
    Switch(SLOW_STEP_MS, "test", "0", "every engine step lasts at least N ms", slow_step_ms),
    _text(TESTS_SERIAL, "test", "unset", "the test runner runs pytest as one process"),
)
"""Every switch, by kind (docs/configuration.md lists them in this order)."""

SWITCH: dict[str, Switch] = {switch.name: switch for switch in SWITCHES}
RULES: dict[str, Callable[[], object]] = {s.name: s.read for s in SWITCHES if s.parsed}
"""Every switch parsed, by name."""


def value(name: str) -> object:
    """A declared switch's value, by its rule (``KeyError`` for a name not in ``SWITCHES``)."""
    return SWITCH[name].read()


def check_environment() -> None:
    """Parse every switch set in this process's environment: a refused one raises ``SwitchError``
    naming the variable, before any engine starts."""
    check_all(RULES)
