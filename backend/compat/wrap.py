"""The one way a patch replaces attributes of a module it was handed: guard, wrap, mark.

``wrap(module, {"Class.method": make, ...}, mark=..., label=...)`` replaces each named attribute
by ``make(original)`` (``__wrapped__`` set to the original), once: the mark (on the module, or on
the class where ``on_class``) says it is done. Every target is looked up before any is replaced, so
a patch is installed whole or not at all. A target vLLM no longer has is never passed over in
silence: a required patch raises ``MissingTarget`` (an ``AttributeError``, as the plain lookup
raised before), an optional one says in the engine's log that it is not installed and why.
``tests/compat/test_compat_patches.py`` resolves every declared target in the installed vLLM, so an
upgrade that moves one fails a test first. Standard library only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

LOGGER = "vllm.gemma_chat"
"""Under vLLM's own logger (its handler, once vLLM has set it up), as ``engine_log`` writes."""


class MissingTarget(AttributeError):
    """A patch's target is not in the installed vLLM (or library): the patch cannot be installed."""


def _lookup(root: Any, dotted: str) -> Any:
    owner = root
    for part in dotted.split("."):
        owner = getattr(owner, part)
    return owner


def missing(module: Any, dotted: str) -> bool:
    """Whether ``module`` lacks ``dotted`` (``Class.attribute`` or ``attribute``)."""
    try:
        _lookup(module, dotted)
    except AttributeError:
        return True
    return False


def say_missing(label: str, module: Any, names: list[str]) -> str:
    """The log line for a patch not installed because its targets are gone (and return it)."""
    message = (
        f"gemma-chat {label}: not installed: {getattr(module, '__name__', module)} has no "
        f"{', '.join(names)} (an upgraded vLLM? docs/patches.md)"
    )
    logging.getLogger(LOGGER).warning(message)
    return message


def wrap(
    module: Any,
    makers: Mapping[str, Callable[[Any], Any]],
    *,
    mark: str,
    label: str,
    on_class: bool = False,
    optional: bool = False,
) -> bool:
    """Replace each ``makers`` target of ``module`` by ``make(original)``; True if it did.

    The mark goes on ``module``, or with ``on_class`` on the class of the first target (its own
    ``__dict__``: a subclass is not marked by its parent). Nothing is replaced where the mark is
    set already, or (with a log line, or ``MissingTarget`` unless ``optional``) where a target is
    missing."""
    gone = [dotted for dotted in makers if missing(module, dotted)]
    if gone:
        message = say_missing(label, module, gone)
        if optional:
            return False
        raise MissingTarget(message)
    first = next(iter(makers))
    holder = _lookup(module, first.rpartition(".")[0]) if on_class and "." in first else module
    if vars(holder).get(mark, False) if on_class else getattr(holder, mark, False):
        return False
    for dotted, make in makers.items():
        owner_path, _, attribute = dotted.rpartition(".")
        owner = _lookup(module, owner_path) if owner_path else module
        original = getattr(owner, attribute)
        replacement = make(original)
        if not hasattr(replacement, "__wrapped__"):
            replacement.__wrapped__ = original
        setattr(owner, attribute, replacement)
    setattr(holder, mark, True)
    return True
