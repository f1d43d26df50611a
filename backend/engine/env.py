"""The process environment of vLLM: defaults set before it is first imported, and an engine's own
variables set while it starts (its spawned processes inherit them)."""

from __future__ import annotations

import os
import threading

DEFAULTS = {
    # vLLM logs to stdout by default; gemma-chat's stdout is the reply, so its log goes to stderr
    # (which the CLI and the TUI send to a log file).
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",
    # No usage reporting from an offline chat tool.
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def prepare() -> None:
    """Set vLLM's environment defaults (the user's own values win). Call before importing vllm."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)


_IMPORT_LOCK = threading.Lock()


def import_engine() -> None:
    """Import vLLM's engine modules (and transformers through them) on one thread at a time.

    Two threads importing them for the first time at once (two engine starts, or one start and
    a tokenizer loading beside it) see each other's half-initialized modules: ``cannot import
    name 'PreTrainedConfig' from 'transformers'`` stopped every ``bench`` start. Whoever comes
    second waits here until the first import is complete; after that this costs nothing."""
    prepare()
    with _IMPORT_LOCK:
        import transformers  # noqa: F401  (its lazy module finishes before vLLM reads it)
        import vllm.engine.arg_utils
        import vllm.v1.engine.async_llm  # noqa: F401


def apply_env(values: dict[str, str]) -> dict[str, str | None]:
    """Set an engine's variables; return the previous values for ``restore_env``."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    return previous


def restore_env(previous: dict[str, str | None]) -> None:
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
