"""Process-wide settings that must be in place before vLLM is first imported."""

from __future__ import annotations

import os

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
