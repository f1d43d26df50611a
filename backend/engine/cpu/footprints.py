"""Each CPU engine's footprint as measured here: what the host-memory plan counts on next time.

Once an in-process engine on the CPU build is ready, the anonymous resident memory of the processes
its start spawned (vLLM's engine core, and its worker where there is one) is its footprint; it is
kept per model files, path, KV cache size and vLLM version in one small JSON file in the cache
folder, and the next plan (``host_plan``) uses it instead of the estimate. Unreadable or unwritable
is ignored (the estimate stands), and so is a record no start here could have made: more than this
machine's RAM and swap together (a hand-edited or copied file). Deleting the file forgets every
record (the next start estimates, then measures again).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from backend.config import cache_json, locations
from backend.engine.model.footprint import GIB, Size

FILE_NAME = "engine-footprints.json"


def key(model: Path, drafter: Path | None, path: str, kv_bytes: int) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        vllm = version("vllm")
    except PackageNotFoundError:
        vllm = "?"
    parts = [path, str(kv_bytes), vllm]
    for directory in (model, drafter):
        if directory is not None:
            files = sorted(directory.glob("*.safetensors"))
            parts += [str(directory.resolve())] + [f"{f.name}:{f.stat().st_size}" for f in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def records_file() -> Path:
    return locations.cache_dir() / FILE_NAME


def machine_bytes() -> int:
    """This machine's RAM and swap together: more than any engine started here can hold resident."""
    import psutil

    return int(psutil.virtual_memory().total) + int(psutil.swap_memory().total)


def recorded(entry: str) -> Size | None:
    value = cache_json.read_object(records_file()).get(entry)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= machine_bytes():
        return Size(value, True, f"{value / GIB:.2f} GiB resident when its last start here was ready")
    return None


def record(entry: str, resident_bytes: int) -> None:
    if not 0 < resident_bytes <= machine_bytes():
        return
    path = records_file()
    with cache_json.locked(path):
        doc = cache_json.read_object(path)
        doc[entry] = int(resident_bytes)
        cache_json.write_object(path, doc)


def engine_key(engine_kwargs: dict[str, object], path: str) -> str | None:
    """``key`` for an engine from its vLLM arguments; None where it is no CPU engine (a GPU's)."""
    kv = engine_kwargs.get("kv_cache_memory_bytes")
    if not isinstance(kv, int):
        return None
    spec = engine_kwargs.get("speculative_config")
    drafter = spec.get("model") if isinstance(spec, dict) else None
    return key(
        Path(str(engine_kwargs["model"])), Path(drafter) if isinstance(drafter, str) else None, path, kv
    )


def remember(engine_kwargs: dict[str, object], path: str, spawned: list[Any]) -> None:
    """Record a ready CPU engine's footprint: its processes' (``spawned``) anonymous resident memory."""
    from backend.engine.cpu.processes import resident_anon_bytes

    entry = engine_key(engine_kwargs, path)
    if entry is not None:
        record(entry, resident_anon_bytes(spawned))
