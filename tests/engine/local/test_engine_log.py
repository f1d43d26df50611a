"""A failed engine start becomes one readable message, from the words in vLLM's own log."""

from __future__ import annotations

from pathlib import Path

from backend.engine.local.log import diagnose
from backend.errors import NotEnoughMemory

KILLED = (
    "(EngineCore pid=20681) ERROR 12-01 17:55:01 [multiproc_executor.py:315] Worker proc VllmWorker-0 "
    "died unexpectedly (exit code: -9), shutting down executor.\n"
    "(EngineCore pid=20681) ERROR 12-01 17:55:01 [core.py:1510] RuntimeError: cancelled\n"
)
"""vLLM 0.32's log when the kernel's out-of-memory killer ended a worker (the E2B architecture on a
24 GiB machine, profiling its vision tower)."""


def test_a_worker_killed_by_the_system_is_said_to_be_short_of_memory(tmp_path: Path) -> None:
    log = tmp_path / "bench-engines.log"
    error = RuntimeError("Engine core initialization failed. See root cause above.")
    found = diagnose(error, KILLED, log)
    assert isinstance(found, NotEnoughMemory)
    assert found.problem.startswith("The engine's worker process was killed by the system while starting")
    assert "not enough memory" in found.problem and str(log) in found.fix


def test_an_unrecognised_failure_keeps_vllms_last_words(tmp_path: Path) -> None:
    found = diagnose(RuntimeError("first line\nthe real reason"), "nothing useful", None)
    assert found.problem == "The engine failed to start: the real reason" and found.fix == ""


WORKER_RAISED = (
    "(Worker pid=22924) ERROR 12-02 22:10:52 [multiproc_executor.py:953]     g = torch.cuda.CUDAGraph()\n"
    "(Worker pid=22924) ERROR 12-02 22:10:52 [multiproc_executor.py:953]     raise RuntimeError("
    'f"Tried to instantiate dummy base class {class_name}")\n'
    "(Worker pid=22924) ERROR 12-02 22:10:52 [multiproc_executor.py:953] RuntimeError: Tried to "
    "instantiate dummy base class CUDAGraph\n"
    "(EngineCore pid=22874) ERROR 12-02 22:10:55 [core.py:1510] Exception: WorkerProc initialization "
    "failed due to an exception in a background process. See stack trace for root cause.\n"
    "Exception: WorkerProc initialization failed due to an exception in a background process. See "
    "stack trace for root cause.\n"
)
"""vLLM 0.32's CPU build loading a centroid-masked drafter without gemma-chat's patch (2026-12-02):
the worker's own error, then the engine core's wrappers around it."""


def test_a_failure_in_a_worker_is_told_by_the_workers_own_words(tmp_path: Path) -> None:
    log = tmp_path / "chat-engine.log"
    error = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    found = diagnose(error, WORKER_RAISED, log)
    assert (
        found.problem
        == "The engine failed to start: RuntimeError: Tried to instantiate dummy base class CUDAGraph"
    )
    assert str(log) in found.fix
    assert diagnose(error, "no traceback here", None).problem.endswith("Failed core proc(s): {}")
