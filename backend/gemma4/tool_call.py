"""A tool call as Gemma 4 wrote it: the tool's name, its arguments, and the text they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for: the tool's name and its (parsed, not yet validated) arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    """The call as the model wrote it."""
    error: str | None = None
    """Set when the call text could not be parsed (then ``arguments`` is empty)."""
    written: Any = None
    """The arguments as written (``backend.gemma4.call_values.parse_written``: undelimited values
    as ``Bare``), for the tool's schema to type; None for a call made in code."""
