"""One case of the hostile-input corpus (``tests/hostile/test_hostile_inputs.py``): a call the worker
(``tests/hostile/hostile_worker.py``) makes, and how it must end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    id: str
    call: str
    args: list[Any]
    expect: str
    """``refused`` or ``ok``."""
    phrases: tuple[str, ...] = ()
    """Must all appear in the message (the input's name and the reason)."""
    extra: dict[str, Any] = field(default_factory=dict)
