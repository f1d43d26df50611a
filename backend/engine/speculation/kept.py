"""Where the optimized path's speculation choices are kept, and reading them back checked: an
entry the probe could not have written is dropped alone (named in a notice) and not used; stores
merge under a lock; a file the user named that is not a regular file is refused and left alone."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from backend.config import cache_json, locations, switch_rules
from backend.engine.speculation.choice import SpeculationChoice

CHOICES_FILE = "speculation-choices.json"
CHOICES_ENV = switch_rules.SPECULATION_CHOICES
"""A file to keep choices in instead of the cache folder's (several homes share one measurement:
the choice is keyed by model and machine anyway)."""

METHODS = ("mtp", "ngram", "none")
MAX_DRAFTS = 8
"""The probe never tries more drafts than this (vLLM's own bound on the optimized path)."""


MAX_SPEEDUP = 1000.0
MAX_UP_TO = 1 << 16
MAX_TEXT = 2000
MAX_LIST = 64


def _number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} {str(value)[:40]!r} is not a finite number")
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside {low:g}..{high:g}")
    return float(value)


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} {str(value)[:40]!r} is not an integer")
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside {low}..{high}")
    return value


def _text(value: Any, name: str, most: int = MAX_TEXT) -> None:
    if not isinstance(value, str) or len(value) > most:
        raise ValueError(f"{name} is not a text of at most {most} characters")


def _items(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise ValueError(f"{name} is not a list of at most {MAX_LIST} items")
    return value


def _checked_run(run: Any) -> None:
    if not isinstance(run, dict):
        raise ValueError("a run is not an object")
    if run.get("method") not in METHODS:
        raise ValueError(f"a run's method {str(run.get('method'))[:40]!r} is none of {', '.join(METHODS)}")
    _integer(run.get("drafts"), "a run's drafts", 0, MAX_DRAFTS)
    for rate in _items(run.get("rates"), "a run's rates"):
        _number(rate, "a run's rate", 0.0, 1e7)
    for count in _items(run.get("histogram", []), "a run's histogram"):
        _integer(count, "a run's histogram count", 0, 1 << 31)
    for name in ("decode_steps", "decode_tokens"):
        _integer(run.get(name, 0), f"a run's {name}", 0, 1 << 40)
    if run.get("step_ms") is not None:
        _number(run["step_ms"], "a run's step_ms", 0.0, 1e7)
    _text(run.get("attention", ""), "a run's attention")
    for name in ("diverged", "kernel_only"):
        for index in _items(run.get(name, []), f"a run's {name}"):
            _integer(index, f"a run's {name} index", 0, 1 << 20)


def _checked(doc: Any) -> SpeculationChoice:
    """A stored entry as the probe writes it (``ValueError`` naming what is not): every number
    finite and in range, counts integers, texts bounded, a by-load schedule that never drafts more
    as load rises, every run well formed, and the lines it shows computable."""
    if not isinstance(doc, dict):
        raise ValueError("an entry is not an object")
    if doc.get("method") not in METHODS:
        raise ValueError(f"method {str(doc.get('method'))[:40]!r} is none of {', '.join(METHODS)}")
    low = 0 if doc["method"] == "none" else 1
    _integer(doc.get("drafts"), "drafts", low, MAX_DRAFTS)
    for name in ("speedup", "speedup_low", "speedup_high"):
        _number(doc.get(name), name, 0.0, MAX_SPEEDUP)
    _number(doc.get("attention_speedup", 1.0), "attention_speedup", 0.0, MAX_SPEEDUP)
    for name in ("reason", "measured_by", "attention"):
        _text(doc.get(name, ""), name)
    if not isinstance(doc.get("predicted", False), bool):
        raise ValueError("predicted is not true or false")
    for line in _items(doc.get("load_figures", []), "load_figures"):
        _text(line, "a load figure", 400)
    for run in _items(doc.get("runs"), "runs"):
        _checked_run(run)
    if doc.get("by_load") is not None:
        previous = MAX_DRAFTS
        for step in _items(doc["by_load"], "by_load"):
            if not isinstance(step, list) or len(step) != 2:
                raise ValueError("by_load is not a list of [up_to, drafts] pairs")
            _integer(step[0], "by_load's up_to", 1, MAX_UP_TO)
            drafts = _integer(step[1], "by_load's drafts", 1, MAX_DRAFTS)
            if drafts > previous:
                raise ValueError(f"by_load {doc['by_load']} drafts more as load rises")
            previous = drafts
    choice = SpeculationChoice.from_json(doc)
    if choice.attention:
        config = json.loads(choice.attention)
        if not isinstance(config, dict):
            raise ValueError("attention is not a JSON object")
    choice.verdict()  # what paths and the engine's start show must be computable
    choice.by_load_text(figures=False)
    return choice


def choices_file() -> Path:
    """Where choices are kept: ``GEMMA_CHAT_SPECULATION_CHOICES``, else the cache folder's file."""
    shared = os.environ.get(CHOICES_ENV, "").strip()
    return Path(shared) if shared else locations.cache_dir() / CHOICES_FILE


def _own() -> bool:
    """Whether the choices file is the app's own (in its cache folder), not one a user named."""
    return not os.environ.get(CHOICES_ENV, "").strip()


def stored_choice(key: str) -> SpeculationChoice | None:
    """The choice kept for ``key``; an entry the probe could not have written is dropped alone
    (named in a notice): the other models' choices stay."""
    path = choices_file()
    doc = cache_json.read_object(path, own=_own())
    if key not in doc:
        return None
    try:
        return _checked(doc[key])
    except (ValueError, KeyError, TypeError, ArithmeticError) as error:
        _update(path, key, None)
        why = str(error)[:200]
        cache_json.notice(path, f"its entry for this model is not a measured choice ({why}): dropped alone")
        return None


def _update(path: Path, key: str, entry: dict[str, Any] | None) -> bool:
    """Set or drop one entry under the file's lock, merged with what other processes stored."""
    with cache_json.locked(path):
        doc = cache_json.read_object(path, own=_own())
        if entry is None:
            doc.pop(key, None)
        else:
            doc[key] = entry
        return cache_json.write_object(path, doc, own=_own())


def store_choice(key: str, choice: SpeculationChoice | None) -> None:
    """Keep ``choice`` for ``key`` (None forgets it)."""
    _update(choices_file(), key, None if choice is None else choice.to_json())


def forget_choice(key: str) -> None:
    store_choice(key, None)
