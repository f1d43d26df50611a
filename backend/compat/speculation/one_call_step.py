"""The optimized path's decode step is one call from the engine core to the model worker.

vLLM's engine core runs every step as two calls to its worker process
(``vllm.v1.engine.core.EngineCore.step``): ``execute_model`` (the forward pass; the worker keeps
the logits and answers None), then ``sample_tokens(grammar_output)`` once the core has built the
structured-output bitmask. Each call is a message through the shared-memory ring, a
notification and a wait on both sides. When a step has no structured-output request the core's
bitmask is None (``Scheduler.get_grammar_bitmask``), so the second call is always
``sample_tokens(None)``. Where the engine's environment sets ``GEMMA_CHAT_ONE_CALL_STEP=1`` (the
optimized path does on a CPU; the baseline never does), the worker makes that call itself at
the end of ``execute_model`` and answers with its output; the core, given an output, skips its
own ``sample_tokens`` (it does so for any non-None answer). The same functions run in the same
process in the same order on the same data: no bit moves. Steps with structured output, and
pipeline-parallel workers, keep vLLM's two calls. Standard library only until vLLM's module is
imported.
"""

from __future__ import annotations

from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

MODULE = "vllm.v1.worker.gpu_worker"
ENV = switch_rules.ONE_CALL_STEP
_PATCHED = "_gemma_chat_one_call_step"
IN_USE = "gemma-chat one-call step: in use (the worker samples at the end of execute_model)"


def folds(worker: Any, scheduler_output: Any) -> bool:
    """Whether the engine core's second call for this step would be ``sample_tokens(None)``."""
    parallel = worker.vllm_config.parallel_config
    return not getattr(scheduler_output, "has_structured_output_requests", True) and (
        parallel.pipeline_parallel_size == 1
    )


def _one_call(original: Any) -> Any:
    def execute_model(self: Any, scheduler_output: Any) -> Any:
        output = original(self, scheduler_output)
        if output is not None or not folds(self, scheduler_output):
            return output
        log_once(IN_USE)
        return self.sample_tokens(None)

    return execute_model


def patch(module: Any) -> None:
    if on(ENV):
        wrap(module, {"Worker.execute_model": _one_call}, mark=_PATCHED, label="one-call step")


def install_import_hook() -> None:
    after_import(MODULE, patch)
