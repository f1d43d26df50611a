"""vLLM's compile cache, one compiled graph per engine path: the key gemma-chat adds, and what
happens when a cached graph fails to load.

vLLM keys its compile cache (the AOT-compiled model and the inductor cache beneath it, under
``VLLM_CACHE_ROOT/torch_compile_cache/torch_aot_compile/<hash>``) by its own configuration and the
model's source. What gemma-chat patches into an engine's processes is in neither: with one shared
entry, the baseline loaded the optimized path's graph, which calls the bfloat16 linear kernel's
operator that the baseline never loads, and died; the other order ran the optimized path on the
baseline's graph, without the kernel. vLLM hashes its ``additional_config`` into the key (a free
dictionary for plug-ins; nothing on the paths gemma-chat runs reads it), so every engine passes
``{"gemma_chat_graph": <digest>}``: a digest of every ``GEMMA_CHAT_*`` variable the engine's
processes start with (the kernel's thread count aside: threads change no bit and no graph; the
kernel by a digest of the compiled file itself, not its path) and the forced CPU-class decisions in the
process's environment. The paths differ in those variables on a CPU, so each loads only what it
compiled; an entry written before the key existed (no ``additional_config``) is never loaded.

If a start fails after vLLM loaded a graph from the cache (its log says ``Directly load AOT
compilation from path …``), that entry is set aside and the engine starts once more, compiling
afresh; the engine log and the app say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from backend.config import switch_rules
from backend.config.switch_rules import ROW_EXACT_KERNEL as ROW_EXACT_KERNEL_ENV
from backend.errors import GemmaChatError
from backend.kernels.env import FORCE_ENV, KERNEL_ENV, THREADS_ENV

T = TypeVar("T")

GRAPH_KEY = "gemma_chat_graph"
KEY_VERSION = 3
"""Bumped when the key's recipe changes, or what a graph bakes in changes meaning, so entries keyed
the old way are not loaded (2: row-exact layers are called by name, no longer by check order; 3:
every linear layer is checked — a graph compiled before called E2B's per-layer input gates
directly — and layers the one-pass kernel computes whole are called through the row-exact op)."""
GRAPH_REASON = (
    "vLLM's compile cache keyed by what gemma-chat patches into this engine (its GEMMA_CHAT_* "
    "variables, the kernel's build): each path loads only the graph it compiled"
)
OWN_PREFIX = "GEMMA_CHAT_"
NOT_IN_GRAPH = frozenset({THREADS_ENV})
PROCESS_VARIABLES = (FORCE_ENV, switch_rules.LINEAR_MIN_WEIGHTS)
"""Variables that alter the traced graph when they are set in the app's own environment (the
engine's processes inherit it): forced decisions and the kernel's layer-size threshold."""
_LOADED = re.compile(r"Directly load AOT compilation from path (\S+)")
SET_ASIDE_DIR = "set-aside-by-gemma-chat"
AOT_DIR = "torch_aot_compile"


@lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def kernel_digest(path: str) -> str:
    """The compiled kernel's own digest (a rebuilt file is another graph's operator)."""
    try:
        stat = os.stat(path)
        return _file_digest(path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        return "unreadable"


def graph_factors(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the graph key is a digest of: the engine's ``GEMMA_CHAT_*`` variables, the kernel's
    build, and the forced decisions of the process environment."""
    environ = os.environ if environ is None else environ
    factors = {k: v for k, v in env.items() if k.startswith(OWN_PREFIX) and k not in NOT_IN_GRAPH}
    for name in PROCESS_VARIABLES:
        if name not in factors and environ.get(name):
            factors[name] = environ[name]
    for kernel in (
        KERNEL_ENV,
        ROW_EXACT_KERNEL_ENV,
    ):  # the build, not where it lies (two homes share vLLM's cache)
        if kernel in factors:
            factors[kernel] = kernel_digest(factors[kernel])
    return factors


def graph_key(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """The value of ``additional_config["gemma_chat_graph"]`` for an engine with ``env``."""
    text = json.dumps([KEY_VERSION, sorted(graph_factors(env, environ).items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_graph_key(kwargs: dict[str, object], env: Mapping[str, str]) -> dict[str, object]:
    """vLLM's engine arguments with the graph key in ``additional_config``."""
    extra = kwargs.get("additional_config")
    merged = {**(extra if isinstance(extra, dict) else {}), GRAPH_KEY: graph_key(env)}
    return {**kwargs, "additional_config": merged}


def loaded_entry(log_text: str) -> Path | None:
    """The cache entry (the hash directory) the engine loaded a compiled graph from, per its log."""
    found = _LOADED.findall(log_text)
    if not found:
        return None
    model = Path(found[-1])  # …/torch_aot_compile/<hash>/rank_<r>_<dp>/model
    entry = model.parent.parent if model.parent.name.startswith("rank_") else model.parent
    return entry if _is_cache_entry(entry) else None


def _is_cache_entry(entry: Path) -> bool:
    """Whether ``entry`` is a hash folder in vLLM's ``torch_aot_compile`` (anything else a log line
    names is never moved or deleted: gemma-chat removes only cache entries)."""
    return entry.parent.name == AOT_DIR and entry.name not in ("", ".", "..")


def set_aside(entry: Path) -> Path | None:
    """Move a cache entry out of vLLM's way (beside it, for a look); None where it could not move:
    then it is removed, and where that fails too the next start meets it again."""
    if not _is_cache_entry(entry):
        return None
    target = entry.parent / SET_ASIDE_DIR / f"{entry.name}-{int(time.time())}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        entry.rename(target)
        return target
    except OSError:
        shutil.rmtree(entry, ignore_errors=True)
        return None


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def log_since(path: Path | None, offset: int, limit: int = 1 << 20) -> str:
    """The engine log written since ``offset`` (its last ``limit`` bytes)."""
    if path is None or not path.is_file():  # never open a FIFO or a device in its place
        return ""
    try:
        with open(path, "rb") as file:
            file.seek(max(offset, log_size(path) - limit))
            return file.read(limit).decode(errors="replace")
    except OSError:
        return ""


UNCOMPILABLE = ("'", '"', "\\")
"""Characters torch.compile's C++ step cannot take in a path: its command line is split as a shell
would (``shlex``) and its sources name headers in C string literals, so a cache folder under a home
like ``/home/o'brien`` failed every cold start after minutes with a compiler error."""


def cache_folders(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The folders torch.compile writes and compiles in, by where each comes from: vLLM's cache
    root (``VLLM_CACHE_ROOT``, else ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``, as vLLM reads
    it) and inductor's own, where set."""
    env = os.environ if environ is None else environ
    if env.get("VLLM_CACHE_ROOT"):
        found = {"VLLM_CACHE_ROOT": os.path.expanduser(env["VLLM_CACHE_ROOT"])}
    else:
        base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        found = {"VLLM_CACHE_ROOT (unset: the default)": os.path.join(base, "vllm")}
    if env.get("TORCHINDUCTOR_CACHE_DIR"):
        found["TORCHINDUCTOR_CACHE_DIR"] = env["TORCHINDUCTOR_CACHE_DIR"]
    return found


def check_cache_folders(environ: Mapping[str, str] | None = None) -> None:
    """Refuse, before any engine, a compile cache folder whose path the C++ step cannot take."""
    from backend.errors import EngineStartFailed

    for source, folder in cache_folders(environ).items():
        bad = sorted({c for c in folder if c in UNCOMPILABLE or not c.isprintable()})
        if bad:
            shown = " ".join(repr(c) for c in bad)
            raise EngineStartFailed(
                f"The compile cache folder {folder} (from {source}) has {shown} in its path: "
                "torch.compile's C++ step cannot take such a path, and every engine start would fail "
                "after minutes of compiling.",
                "Point VLLM_CACHE_ROOT (and TORCHINDUCTOR_CACHE_DIR, where set) at a folder whose "
                "path has no quotes or backslashes, e.g. VLLM_CACHE_ROOT=/var/tmp/vllm-cache.",
            )


async def built_or_compiled_afresh(
    build: Callable[[], T], log_path: Path | None, closing: Callable[[], bool], say: Callable[[str], None]
) -> tuple[T, str | None]:
    """``build()`` (in a thread), and a note for the user where it ran twice: where the start failed
    after vLLM loaded a compiled graph from its cache, that entry is set aside and the engine is
    built once more, compiling afresh (not while the app is ``closing``)."""
    offset = log_size(log_path)
    try:
        return await asyncio.to_thread(build), None
    except GemmaChatError:
        raise
    except Exception:
        entry = loaded_entry(log_since(log_path, offset))
        if entry is None or closing():
            raise
    moved = await asyncio.to_thread(set_aside, entry)
    where = f"moved to {moved}" if moved is not None else "removed"
    note = (
        f"The compiled graph in vLLM's compile cache failed to load ({entry}); it was {where} "
        "and the engine compiled afresh."
    )
    with contextlib.suppress(OSError):  # fd 2: the engine log while an engine starts
        os.write(2, f"gemma-chat: {note}\n".encode())
    say("the cached compiled graph failed to load: compiling afresh")
    return await asyncio.to_thread(build), note
