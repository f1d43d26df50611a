"""The draft schedule's engine-core method however the engine core starts (issue 57, item 2).

On CUDA vLLM forks the engine core from the app's process, which has imported
``vllm.v1.engine.core`` before the engine's variables are set (``import_engine``); the CPU build
always spawns. A forked child is made here the same way: the module imported first, the variable
set after, then ``fork``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import multiprocessing, os, sys
    from types import SimpleNamespace

    from backend import compat
    from backend.compat.speculation.draft_schedule import ENV, METHOD
    from backend.engine.env import import_engine

    compat.install_import_hooks()
    os.environ.pop(ENV, None)
    import_engine()  # as the app does before any engine's variables are set
    from vllm.v1.engine.core import EngineCoreProc

    def core(queue):
        fake = SimpleNamespace(scheduler=SimpleNamespace(dynamic_sd_lookup=[0] * 9, num_spec_tokens=4))
        try:
            queue.put(("set", getattr(EngineCoreProc, METHOD)(fake, 3, 2, [[5, 1]])))
        except Exception as error:
            queue.put(("refused", str(error)))

    results = []
    for env in (True, False):
        if env:
            os.environ[ENV] = "1"  # the engine's variables, applied before vLLM forks its core
        else:
            os.environ.pop(ENV, None)
        queue = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(target=core, args=(queue,))
        child.start()
        results.append(queue.get(timeout=60))
        child.join(60)
    print(repr(results))
    """
)


def test_a_forked_engine_core_has_the_method_and_only_the_optimized_engine_may_call_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GEMMA_CHAT_DRAFT_SCHEDULE"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert results[0] == ("set", [3, 3, 1, 1, 1, 0, 0, 0]), results
    assert results[1][0] == "refused" and "started without GEMMA_CHAT_DRAFT_SCHEDULE=1" in results[1][1]
