"""Errors a user can act on: each names the problem and the fix, in one readable message."""

from __future__ import annotations


class GemmaChatError(Exception):
    """Base of every error shown to the user as text (never as a traceback)."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} {fix}".strip())


class ModelNotFound(GemmaChatError):
    """A model id that is neither a local directory nor in the local Hugging Face cache."""


class NotACheckpoint(GemmaChatError):
    """A path that exists but holds no loadable model."""


class NotEnoughMemory(GemmaChatError):
    """The engine cannot fit its weights or the KV cache for the context window."""


class EngineStartFailed(GemmaChatError):
    """The engine did not start, for a reason not covered above."""


class EngineDied(GemmaChatError):
    """The engine's process ended while it was in use."""


class PromptTooLong(GemmaChatError):
    """A prompt that does not fit the context window together with the reply budget."""
