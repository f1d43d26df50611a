"""Fixes for the engine's dependencies, installed as import hooks in every interpreter.

The set-up writes a one-line ``.pth`` file into the environment that calls
``install_import_hooks()``, so the fixes also reach vLLM's spawned engine processes.
Standard library only until a patched module is actually imported. ``patches.PATCHES`` declares
every patch once (its targets, switch and order); ``wrap.wrap`` is how most replace an attribute.

* ``torchvision_ops``: the package index's CUDA-built torchvision imports beside CPU torch.
* ``gemma4_audio``: Gemma 4's audio tower runs on vLLM's CPU build.
* ``embedding_pack``: an embedding table is packed for a matmul only when used as one (CPU: E2B's
  per-layer table, 4.7 GB, is never packed).
* ``cpu_linear``: the optimized path's bfloat16 linear kernel (only where its engine asks).
* ``forced_linear``: an AVX2 CPU's bfloat16 linears on any CPU (only where ``GEMMA_CHAT_FORCE_LINEAR`` asks).
* ``row_exact_linear``: a verifying step's linear layers give each row a one-row step's bits.
* ``one_call_step``: the optimized engine's decode step is one call to its worker, not two.
* ``prefill_drafts``: the optimized engine's first token does not wait for the drafter, and a
  step that asks for no drafts runs no drafter.
* ``draft_schedule``: the optimized engine's drafts per step can be changed while it runs.
* ``sampled_row_drafts``: the drafter's first pass computes only the rows it samples.
* ``live_spec_metrics``: the optimized engine's draft counts reach the app while a reply streams.
* ``centroid_drafts``: Gemma 4 drafters with centroid-masked embeddings draft on a CPU.
* ``drafter_attention``: the target's per-layer-kind attention does not reach the Gemma 4 drafter.
* ``uni_worker``: the optimized CPU engine's worker computes inside the engine-core process.
* ``aot_cache_load``: vLLM's AOT compile cache loads on the CPU build (no compile at a warm start).
* ``malloc_trim``: a CPU engine returns the memory its start stages freed to the system.
* ``short_warmup``: a CPU engine's start-up warm-up runs 16 dummy tokens, not 2,048.
* ``memory_trace``: an engine's host memory after each start stage, in its log (diagnosis, opt-in).
* ``slow_steps``: every engine step lasts at least ``GEMMA_CHAT_SLOW_STEP_MS`` (tests: E2B's speed).
* ``process_lifetime``: a process gemma-chat started ends when its parent is gone (even SIGKILLed).

Not a hook: ``early_core`` (vLLM's engine-core interpreter started early; ``VllmEngine`` uses it).
"""

from __future__ import annotations

import importlib

from backend.compat.patches import HOOKS


def install_import_hooks() -> None:
    """Each hook of ``patches.PATCHES``, in its order (the order decides which wrapper runs first)."""
    for patch in HOOKS:
        importlib.import_module(f"backend.compat.{patch.module}").install_import_hook()
