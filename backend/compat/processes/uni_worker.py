"""The optimized CPU engine's model worker computes inside the engine-core process.

vLLM's CPU build runs a model in three processes: the front end (this app), the engine core
(scheduling) and a worker (the model), the last two handing every step to each other through a
shared-memory ring. It turns the uniprocess executor (``distributed_executor_backend="uni"``:
the worker inside the engine-core process) back into the multiprocess one
(``CpuPlatform.check_and_update_config``) because only the multiprocess executor sets the
worker's OpenMP environment — thread count and binding (``OMPProcessManager.configure_omp_envs``).
Where the engine's environment sets ``GEMMA_CHAT_UNI_WORKER=1`` (the optimized path does on a
CPU; the baseline never does) and its arguments ask for ``"uni"``:

* the platform keeps ``"uni"`` (world size 1 only);
* the engine-core process is started inside ``configure_omp_envs(rank=0, local_rank=0)`` —
  exactly the OpenMP environment vLLM would have given the worker process, so every operator
  runs on the same number of threads as in the multiprocess executor: no bit moves.

What it saves is the ring between the two processes: every step's scheduler output written,
notified, read, and its result written back.

vLLM's per-iteration records (``enable_logging_iteration_details``, which the speculation probe
reads) time a step from just after the engine core hands it to its executor until the result is
in: with a worker process that is the forward pass and sampling, but the uniprocess executor has
computed everything before it hands back, so the record would read about zero. In such an engine
the record is timed from the call to the executor instead — the same span the worker process's
record covers. Both checks are made at call time: this app's
process starts baseline engines too. Standard library only until vLLM's modules are imported.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log
from backend.config import switch_rules
from backend.config.switch_rules import on

PLATFORM = "vllm.platforms.cpu"
LAUNCH = "vllm.utils.numa_utils"
CORE = "vllm.v1.engine.core"
EXECUTOR = "vllm.v1.executor.uniproc_executor"
ENV = switch_rules.UNI_WORKER
_PATCHED = "_gemma_chat_uni_worker"
IN_USE = "gemma-chat uni worker: in use (the model worker computes in the engine-core process)"


def asked(vllm_config: Any) -> bool:
    """Whether this engine asked for its worker inside the engine-core process."""
    parallel = vllm_config.parallel_config
    return on(ENV) and parallel.distributed_executor_backend == "uni" and parallel.world_size == 1


def patch_platform(module: Any) -> None:
    platform = module.CpuPlatform
    if getattr(platform, _PATCHED, False):
        return
    original = platform.check_and_update_config.__func__

    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        keep = asked(vllm_config)
        original(cls, vllm_config)
        if keep:
            vllm_config.parallel_config.distributed_executor_backend = "uni"

    platform.check_and_update_config = classmethod(check_and_update_config)
    setattr(platform, _PATCHED, True)


def patch_launch(module: Any) -> None:
    if getattr(module, _PATCHED, False):
        return
    original = module.configure_subprocess

    @contextlib.contextmanager
    def configure_subprocess(
        vllm_config: Any, local_rank: int, dp_local_rank: int | None = None, process_kind: str = "worker"
    ) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if process_kind == "EngineCore" and asked(vllm_config):
                from vllm.utils.ompmultiprocessing import OMPProcessManager

                stack.enter_context(OMPProcessManager(vllm_config).configure_omp_envs(rank=0, local_rank=0))
            stack.enter_context(original(vllm_config, local_rank, dp_local_rank, process_kind))
            yield

    module.configure_subprocess = configure_subprocess
    setattr(module, _PATCHED, True)


_step_began: list[float] = []
"""When this process's uniprocess executor was last asked to run a step (one engine core per process)."""


def patch_executor(module: Any) -> None:
    executor = module.UniProcExecutor
    if getattr(executor, _PATCHED, False):
        return
    original = executor.execute_model
    original_init = executor._init_executor

    def _init_executor(self: Any) -> None:
        original_init(self)
        if asked(self.vllm_config):
            log(IN_USE)  # from the engine-core process, into the engine's own log

    def execute_model(self: Any, scheduler_output: Any, non_block: bool = False) -> Any:
        _step_began[:] = [time.monotonic()]
        return original(self, scheduler_output, non_block)

    executor.execute_model = execute_model
    executor._init_executor = _init_executor
    setattr(executor, _PATCHED, True)


def patch_core(module: Any) -> None:
    core = module.EngineCore
    if getattr(core, _PATCHED, False):
        return
    original = core.capture_iteration_details

    @contextlib.contextmanager
    def capture_iteration_details(self: Any, scheduler_output: Any) -> Iterator[Any]:
        with original(self, scheduler_output) as details:
            yield details
        if details is not None and _step_began and asked(self.vllm_config):
            details.elapsed_ms = (time.monotonic() - _step_began[0]) * 1000

    core.capture_iteration_details = capture_iteration_details
    setattr(core, _PATCHED, True)


def install_import_hook() -> None:
    after_import(PLATFORM, patch_platform)
    after_import(LAUNCH, patch_launch)
    after_import(EXECUTOR, patch_executor)
    after_import(CORE, patch_core)
