"""How much host memory an engine's KV cache gets on the CPU build.

vLLM's CPU build allocates (and touches) the whole KV cache when the engine starts, so its size is
start-up time: 2 GiB took 4 s here, 1 GiB 1 s. A ``kv_cache_gib`` setting is used as given. Unset,
the cache is sized for the model: room for ``SIZED_REQUESTS`` requests of the whole context window,
counted from the checkpoint's config (``footprint.kv_bytes_per_request``), times ``PAGE_MARGIN``,
between ``MIN_GIB`` and ``MAX_GIB``. Gemma 4 E2B at an 8192-token window reaches the 2 GiB cap;
the demo model gets the 0.25 GiB floor. On a machine whose RAM cannot hold that beside one engine's
weights and runtime (``host_plan``: the app, a start's transient, a margin), the cache gets what is
left, down to the floor: E2B on 16 GiB gets about 1.3 GiB, and both paths the same.
"""

from __future__ import annotations

import math
from pathlib import Path

from backend.engine.argument import Argument
from backend.engine.model.footprint import kv_bytes_per_request

GIB = 2**30
SIZED_REQUESTS = 16
"""Full-window requests a sized cache holds (the bench's heaviest run has 8 at once)."""
PAGE_MARGIN = 3
"""vLLM's paged, per-group allocation holds fewer requests than the config's count: on the demo
model 1 GiB held 174 full 8192-token requests by vLLM's count (its log), 468 by the config's: 2.7x."""
MIN_GIB = 0.25
MAX_GIB = 2.0
"""The cap is the old fixed size: a model this sizing cannot count gets it too."""
STEP = 64 * 2**20


def cpu_window(model: Path, max_model_len: int | None) -> int:
    """A CPU engine's context window: the setting, else what this machine's memory suits, within
    the model's maximum (the engine's arguments and the host plan's KV sizing read it alike)."""
    from backend.engine.gpu.window import model_max_len
    from backend.engine.platform import default_max_model_len

    return max_model_len or min(default_max_model_len(), model_max_len(model))


def cpu_kv_cache(
    kv_cache_gib: float | None, model: Path, window: int, dtype: str, drafter: Path | None = None
) -> Argument:
    """The ``kv_cache_memory_bytes`` argument for one CPU engine, with the reason for its size
    (``drafter``: the model's, whose weights the optimized engine also holds; both paths pass it)."""
    if kv_cache_gib is not None:
        return Argument(
            int(kv_cache_gib * GIB), f"{kv_cache_gib:g} GiB of host memory for the KV cache (settings)"
        )
    try:
        per_request = kv_bytes_per_request(model, window, dtype).bytes
    except (OSError, ValueError, KeyError, TypeError):
        return Argument(
            int(MAX_GIB * GIB), f"{MAX_GIB:g} GiB for the KV cache (the model's config gives no count)"
        )
    wanted = PAGE_MARGIN * SIZED_REQUESTS * per_request
    size = min(max(wanted, int(MIN_GIB * GIB)), int(MAX_GIB * GIB))
    size = math.ceil(size / STEP) * STEP
    why = (
        f"{size / GIB:.2f} GiB for the KV cache: {SIZED_REQUESTS} requests of {window} tokens "
        f"({per_request / 2**20:.1f} MiB each by the config) x{PAGE_MARGIN} for vLLM's pages, "
        f"within {MIN_GIB:g}-{MAX_GIB:g} GiB (set kv_cache_gib to choose)"
    )
    room = host_room(model, drafter, dtype)
    if room is not None and room < size:
        size = max(int(MIN_GIB * GIB), room // STEP * STEP)
        why = (
            f"{size / GIB:.2f} GiB for the KV cache: what this machine's RAM leaves beside one engine "
            f"(the model's sizing asks {wanted / GIB:.2f} GiB; set kv_cache_gib to choose)"
        )
    return Argument(size, why)


def host_room(model: Path, drafter: Path | None, dtype: str = "auto") -> int | None:
    """RAM left for one engine's KV cache: this machine's total (or the forced amount) less the
    app, a margin, a start's transient, the weights (with the drafter's, at ``dtype``'s width) and
    the runtime."""
    from backend.engine.cpu.host_plan import APP_BYTES, MARGIN_BYTES, RUNTIME_BYTES, START_BYTES, host_total
    from backend.engine.model.footprint import checkpoint_size

    try:
        weights = sum(checkpoint_size(path, dtype).bytes for path in (model, drafter) if path is not None)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return host_total() - APP_BYTES - MARGIN_BYTES - START_BYTES - RUNTIME_BYTES - weights
