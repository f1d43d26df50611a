"""Fixes for the engine's dependencies, installed as import hooks in every interpreter.

The set-up writes a one-line ``.pth`` file into the environment that calls
``install_import_hooks()``, so the fixes also reach vLLM's spawned engine processes.
Standard library only until a patched module is actually imported. ``patches.PATCHES`` declares
every patch once, in install order, with its targets and switch (docs/patches.md); ``wrap.wrap``
is how most replace an attribute. Not hooks: ``early_core`` (vLLM's engine-core interpreter started early;
``VllmEngine`` uses it) and ``vllm_cli`` (the environment's ``vllm`` command).
"""

from __future__ import annotations

import importlib

from backend.compat.patches import HOOKS


def install_import_hooks() -> None:
    """Each hook of ``patches.PATCHES``, in its order (the order decides which wrapper runs first)."""
    for patch in HOOKS:
        importlib.import_module(f"backend.compat.{patch.concern}.{patch.module}").install_import_hook()
