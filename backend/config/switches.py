"""The ``GEMMA_CHAT_*`` switches that are not settings, each parsed strictly by one rule: a value
outside the rule is refused with the variable named (never ignored, never an ``OverflowError``).

Standard library only (beside ``backend.errors``): vLLM's engine-core process reads switches
too, and it cannot show a message, so ``switch_rules.check_environment`` (the rules themselves)
runs in the app's process before an engine starts (``load_settings`` calls it): the engine's
reads then always parse.

* ``flag(name)``: unset or empty is the default; ``1``, ``true``, ``yes``, ``on`` are on and ``0``,
  ``false``, ``no``, ``off`` are off (any case); anything else is refused.
* ``number(name, default, least=, most=)``: a finite decimal number in ``[least, most]``, no unit.
* ``whole(name, default, least=, most=)``: the same for a whole number.
* ``choice(name, options)``: one of ``options`` (any case), or unset (``""``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from backend.errors import GemmaChatError

ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off")


class SwitchError(GemmaChatError):
    """A ``GEMMA_CHAT_*`` switch whose value its rule refuses."""


def raw(name: str) -> str:
    """The variable's value, stripped (``""`` when unset)."""
    return os.environ.get(name, "").strip()


def flag(name: str, default: bool = False) -> bool:
    """On or off: see the module's rule."""
    value = raw(name).lower()
    if not value:
        return default
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    raise _refused(name, f"is on ({', '.join(ON_WORDS)}) or off ({', '.join(OFF_WORDS)})")


def number(name: str, default: float, *, least: float, most: float, unit: str = "") -> float:
    """A finite number in ``[least, most]`` (``unit`` names what it counts, for the message)."""
    value = raw(name)
    if not value:
        return default
    rule = f"is a number from {least:g} to {most:g}{f' ({unit}, without the unit)' if unit else ''}"
    try:
        parsed = float(value)
    except ValueError:
        raise _refused(name, rule) from None
    if not math.isfinite(parsed) or not least <= parsed <= most:
        raise _refused(name, rule)
    return parsed


def whole(name: str, default: int, *, least: int, most: int) -> int:
    """A whole number in ``[least, most]``."""
    value = raw(name)
    if not value:
        return default
    try:
        parsed = int(value)
    except ValueError:
        parsed = least - 1
    if not least <= parsed <= most:
        raise _refused(name, f"is a whole number from {least} to {most}")
    return parsed


def choice(name: str, options: tuple[str, ...]) -> str:
    """One of ``options`` (lower case), or ``""`` when unset."""
    value = raw(name).lower()
    if value and value not in options:
        raise _refused(name, f"is one of {', '.join(options)} (or unset)")
    return value


def _refused(name: str, rule: str) -> SwitchError:
    shown = os.environ.get(name, "")
    shown = shown if len(shown) <= 40 else shown[:40] + "…"
    return SwitchError(
        f"In the environment: {name}={shown!r} is not a value gemma-chat takes: it {rule}.",
        f"Set {name} to such a value, or unset it (docs/configuration.md lists the switches).",
    )


def check_all(rules: dict[str, Callable[[], object]]) -> None:
    """Parse each of ``rules`` whose variable is set; the first refused one raises ``SwitchError``."""
    for name, parse in rules.items():
        if name in os.environ:
            parse()
