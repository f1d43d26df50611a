"""A line in the engine's own log, from a patch running inside vLLM's processes."""

from __future__ import annotations

_said: set[str] = set()


def log(message: str) -> None:
    """Through vLLM's logger (call after vLLM's logging is set up: not at its import time)."""
    from vllm.logger import init_logger

    init_logger("vllm.gemma_chat").info(message)


def log_once(message: str) -> None:
    """``log``, the first time this process says ``message`` (a patch saying it is in use)."""
    if message not in _said:
        _said.add(message)
        log(message)
