"""Errors a user can act on: each names the problem and the fix, in one readable message."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with control characters, NUL and undecodable bytes (lone surrogates) escaped."""
    return "".join(c if c.isprintable() or c == "\n" else ascii(c)[1:-1] for c in text)


class GemmaChatError(Exception):
    """Base of every error shown to the user as text (never as a traceback).

    File names in a message may hold anything a file system allows; they are shown escaped."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = printable(problem)
        self.fix = printable(fix)
        super().__init__(f"{self.problem} {self.fix}".strip())


def problem_of(error: BaseException) -> str:
    """What went wrong, in one line: a ``GemmaChatError``'s problem, else the type and message
    (where one failing part is reported and skipped while the others go on)."""
    return error.problem if isinstance(error, GemmaChatError) else f"{type(error).__name__}: {error}"


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
