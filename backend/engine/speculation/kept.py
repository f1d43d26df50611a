"""Where the optimized path's speculation choices are kept, and reading them back checked: an
entry the probe could not have written sets the file aside (named in a notice) and is not used."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from backend.config import cache_json, paths
from backend.engine.speculation.choice import SpeculationChoice

CHOICES_FILE = "speculation-choices.json"
CHOICES_ENV = "GEMMA_CHAT_SPECULATION_CHOICES"
"""A file to keep choices in instead of the cache folder's (several homes share one measurement:
the choice is keyed by model and machine anyway)."""

METHODS = ("mtp", "ngram", "none")
MAX_DRAFTS = 8
"""The probe never tries more drafts than this (vLLM's own bound on the optimized path)."""


def _checked(doc: Any) -> SpeculationChoice:
    """A stored entry as the probe writes it (``ValueError`` naming what is not)."""
    if not isinstance(doc, dict):
        raise ValueError("an entry is not an object")
    choice = SpeculationChoice.from_json(doc)
    if choice.method not in METHODS:
        raise ValueError(f"method {choice.method!r} is none of {', '.join(METHODS)}")
    low = 0 if choice.method == "none" else 1
    if not low <= choice.drafts <= MAX_DRAFTS:
        raise ValueError(f"drafts {choice.drafts} is outside {low}..{MAX_DRAFTS}")
    if any(drafts > MAX_DRAFTS for _, drafts in choice.by_load or ()):
        raise ValueError(f"by_load {choice.by_load} drafts more than {MAX_DRAFTS}")
    if choice.attention:
        config = json.loads(choice.attention)
        if not isinstance(config, dict):
            raise ValueError("attention is not a JSON object")
    return choice


def choices_file() -> Path:
    """Where choices are kept: ``GEMMA_CHAT_SPECULATION_CHOICES``, else the cache folder's file."""
    shared = os.environ.get(CHOICES_ENV, "").strip()
    return Path(shared) if shared else paths.cache_dir() / CHOICES_FILE


def stored_choice(key: str) -> SpeculationChoice | None:
    """The choice kept for ``key``; a file holding an entry the probe could not have written is set
    aside (named in a notice) and nothing is used from it."""
    path = choices_file()
    doc = cache_json.read_object(path)
    if key not in doc:
        return None
    try:
        return _checked(doc[key])
    except (ValueError, KeyError, TypeError) as error:
        cache_json.set_aside(path, f"its entry for this model is not a measured choice ({error})")
        return None


def store_choice(key: str, choice: SpeculationChoice | None) -> None:
    """Keep ``choice`` for ``key`` (None forgets it)."""
    path = choices_file()
    doc = cache_json.read_object(path)
    if choice is None:
        doc.pop(key, None)
    else:
        doc[key] = choice.to_json()
    cache_json.write_object(path, doc)


def forget_choice(key: str) -> None:
    store_choice(key, None)
