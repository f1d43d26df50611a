"""The host-memory plan on the CPU build: how the two paths' engines share this machine's RAM.

Made before any engine starts, from the RAM available now and each path's footprint:

* ``side-by-side``: both engines fit at once (each engine's steady footprint, one start's
  transient on top, and the app's own growth as vLLM's front end loads);
* ``swap``: one fits, two do not — F2, F3 and ``ask --path compare`` stop one engine and start
  the other (never timed; the status bar and the verdict say so);
* refused: not even one engine's weights and KV cache fit (or a footprint measured here) — the
  message gives both numbers before minutes of loading.

An engine's footprint is *measured* where a start of this model and path on this machine has
recorded it (``footprints``: the engine processes' anonymous resident memory once it is ready);
else *estimated* from its parts: the weights on disk (a described model: counted from its config),
the drafter's, the KV cache the engine is given, and ``RUNTIME_BYTES``. ``START_BYTES`` (a start's
transient) and ``APP_BYTES`` (the app's growth) are measured figures of Gemma 4 E2B on this
project's machines, used for every model. ``engine.both_paths`` forces a mode;
``GEMMA_CHAT_FORCE_HOST_MEMORY_GIB`` sets the RAM the plan sees (tests: a 16 GB machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from backend.config import switch_rules
from backend.config.switch_rules import host_memory_gib
from backend.engine.gpu.card import GpuRefused
from backend.engine.model.footprint import GIB, Size, checkpoint_size

Mode = Literal["side-by-side", "swap"]
FORCE_ENV = switch_rules.HOST_MEMORY
RUNTIME_BYTES = int(1.75 * GIB)
"""An engine beyond its weights and KV cache: vLLM and torch loaded (~0.45 GiB), the tied LM head's
packed copy (0.75 GiB for E2B's 262,144 x 1,536), compiled code and buffers. Measured on an
E2B-shaped checkpoint, AVX512-BF16 EPYC, 2026-12-07: 1.68 GiB at ready (12.72 GiB for 9.63 GiB of
weights and drafter and a 1.44 GiB KV cache), 2.3 GiB after a 1,121-token prompt."""
START_BYTES = int(1.25 * GIB)
"""What a start takes above its engine's steady footprint for a while (the compile's workers, the
warm-up's activations): measured 1.2 GiB at E2B's size."""
APP_BYTES = int(1.5 * GIB)
"""What the app's own process grows by when vLLM's front end loads (measured: 2.0 GiB anonymous
with an E2B engine, ~0.5 GiB of it before)."""
MARGIN_BYTES = GIB // 2
"""Left to the system and other programs."""


class HostRefused(GpuRefused):
    """Not even one engine fits in this machine's available RAM."""


@dataclass(frozen=True)
class HostPlan:
    mode: Mode
    available_bytes: int
    """RAM available to gemma-chat's engines when the plan was made (after ``APP_BYTES``, margin)."""
    footprints: dict[str, Size]
    forced: bool = False
    forced_ram: bool = False

    @property
    def swaps(self) -> bool:
        return self.mode == "swap"

    def lines(self) -> list[str]:
        gib = self.available_bytes / GIB
        ram = "forced by " + FORCE_ENV if self.forced_ram else "available now"
        out = [f"host memory: {gib:.1f} GiB for engines ({ram}, less the app's ~{APP_BYTES / GIB:.1f} GiB)"]
        out += [f"{name} engine needs {size.text()}" for name, size in self.footprints.items()]
        if self.mode == "swap":
            how = "forced by engine.both_paths" if self.forced else "one engine fits in RAM, two do not"
            out.append(
                f"plan: swap ({how}) — F2 and compare (F3) stop one engine and start the other "
                "(minutes at E2B's size); the swap is never timed"
            )
        else:
            how = "forced by engine.both_paths" if self.forced else "both fit in RAM at once"
            out.append(f"plan: side by side ({how})")
        return out


def _forced() -> int | None:
    value = host_memory_gib()
    return int(value * GIB) if value is not None else None


def _meminfo(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_ram() -> tuple[int, bool]:
    """RAM available now (``MemAvailable``), or the forced amount; and whether it was forced."""
    forced = _forced()
    if forced is not None:
        return forced, True
    import psutil

    return _meminfo("MemAvailable") or int(psutil.virtual_memory().available), False


def host_total() -> int:
    """This machine's RAM (``MemTotal``), or the forced amount (what each engine's KV cache is sized
    by: the same for both paths, whatever runs when)."""
    import psutil

    return _forced() or _meminfo("MemTotal") or int(psutil.virtual_memory().total)


def estimated_footprint(model: Path, drafter: Path | None, kv_bytes: int, dtype: str = "auto") -> Size:
    """Weights (at the width the engine holds them: ``dtype``), KV cache and the runtime."""
    parts = [checkpoint_size(model, dtype)] + (
        [checkpoint_size(drafter, dtype)] if drafter is not None else []
    )
    weights = sum(part.bytes for part in parts)
    total = weights + kv_bytes + RUNTIME_BYTES
    how = (
        f"weights {weights / GIB:.2f} + KV cache {kv_bytes / GIB:.2f} + runtime {RUNTIME_BYTES / GIB:.2f} GiB"
    )
    return Size(total, False, how)


def plan_host(footprints: dict[str, Size], both_paths: str = "auto", demo: bool = False) -> HostPlan:
    """The plan for ``footprints`` (``baseline``, ``optimized``) in this machine's RAM; raises
    ``HostRefused`` where not even one engine fits (unless ``both_paths`` forces a mode). ``demo``:
    the model is the demo already (the refusal does not suggest it)."""
    ram, forced_ram = host_ram()
    available = max(0, ram - APP_BYTES - MARGIN_BYTES)
    one = max(size.bytes for size in footprints.values()) + START_BYTES
    both = sum(size.bytes for size in footprints.values()) + START_BYTES
    forced = both_paths in ("side-by-side", "swap")
    # Refused only where what is certain — a footprint measured here, or an estimate's weights and
    # KV cache without its runtime — cannot fit: an estimate's runtime must not refuse a small model.
    certain = {
        name: size.bytes if size.measured else size.bytes - RUNTIME_BYTES for name, size in footprints.items()
    }
    biggest = max(certain, key=lambda name: certain[name])
    if not forced and certain[biggest] > ram - MARGIN_BYTES:
        raise HostRefused(
            f"This machine has {ram / GIB:.1f} GiB of RAM available; the {biggest} engine needs "
            f"{one / GIB:.1f} GiB while it starts ({footprints[biggest].text()}, and "
            f"{START_BYTES / GIB:.2f} GiB for the start), "
            f"{certain[biggest] / GIB:.1f} GiB at the very least.",
            _refusal_fix(footprints[biggest], demo),
        )
    if forced:
        mode: Mode = "swap" if both_paths == "swap" else "side-by-side"
    else:
        mode = "side-by-side" if both <= available else "swap"
    return HostPlan(mode, available, footprints, forced, forced_ram)


def _refusal_fix(size: Size, demo: bool) -> str:
    """What to do where the biggest engine does not fit: a measured footprint names the file it was
    kept in and how to forget it; the demo is not suggested to a run of the demo."""
    from backend.engine.cpu.footprints import records_file

    smaller = "" if demo else ", use a smaller model (--demo)"
    fix = (
        f"Close other programs, lower kv_cache_gib or max_model_len{smaller}, or run against a vLLM "
        "server (--server URL)."
    )
    if size.measured:
        fix = (
            f"That footprint was measured at an earlier start here and kept in {records_file()}: "
            "delete that file to forget it (the next start estimates, then measures again). " + fix
        )
    return fix
