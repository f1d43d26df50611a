"""Whether FlashInfer's precompiled kernels are installed, read from package metadata (no import of
FlashInfer or torch, no GPU): without them FlashInfer compiles its attention modules with nvcc or
downloads cubins when an engine starts — minutes, or a failed start on a machine with no network.

vLLM 0.32's CUDA wheel installs ``flashinfer-python`` but not its kernels: ``flashinfer-cubin`` is
no longer on PyPI, so vLLM's ``requirements/cuda.txt`` pin is left out of the wheel's requirements,
and ``vllm download-kernels`` installs ``flashinfer-cubin`` and ``flashinfer-jit-cache``. The rule
is vLLM's own ``warn_if_flashinfer_kernels_missing`` (``vllm/utils/flashinfer.py``): each package
installed at ``flashinfer-python``'s version, ``flashinfer-cubin`` excused by
``VLLM_HAS_FLASHINFER_CUBIN=1``. Stricter than vLLM in one way: it asks for
``flashinfer-jit-cache`` only where FlashInfer publishes it (torch built for CUDA 12.9 or newer);
here it is always asked for, since without it the attention modules are compiled at start anyway.
"""

from __future__ import annotations

import importlib.metadata
import os

KERNEL_PACKAGES = ("flashinfer-cubin", "flashinfer-jit-cache")
CUBIN_ENV = "VLLM_HAS_FLASHINFER_CUBIN"
"""vLLM's own switch: set to 1, it takes the cubins as present (``vllm.envs``)."""


def installed_version(distribution: str) -> str | None:
    """A distribution's public version (``0.6.18.post1``, the ``+cu130`` tag dropped), None if absent."""
    try:
        return importlib.metadata.version(distribution).split("+", 1)[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def _cubin_excused() -> bool:
    try:
        return bool(int(os.environ.get(CUBIN_ENV, "0") or "0"))
    except ValueError:
        return False


def flashinfer_kernels_missing() -> str:
    """Why FlashInfer would not start from precompiled kernels in this environment ("" when it would)."""
    flashinfer = installed_version("flashinfer-python")
    if flashinfer is None:
        return "flashinfer-python is not installed (vLLM cannot select FlashInfer)"
    wanted = [name for name in KERNEL_PACKAGES if not (name == "flashinfer-cubin" and _cubin_excused())]
    wrong = []
    for name in wanted:
        version = installed_version(name)
        if version != flashinfer:
            wrong.append(f"{name} {version or 'not installed'}")
    if not wrong:
        return ""
    return (
        f"FlashInfer's precompiled kernels are missing for flashinfer-python {flashinfer} "
        f"({', '.join(wrong)}): it would compile or download them at start; "
        "`vllm download-kernels` installs them"
    )
