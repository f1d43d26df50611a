"""One engine setting and the reason it differs from vLLM's default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Argument:
    value: Any
    reason: str
