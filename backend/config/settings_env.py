"""``GEMMA_CHAT_*`` environment variables checked by name, as config keys are: a variable that
matches no setting (``GEMMA_CHAT_TOOL__ENABLED``, ``GEMMA_CHAT_MAX_TOKEN``) is refused with the
variable's name and the setting it was probably meant for, instead of being ignored in silence.

Variables that are not settings (``GEMMA_CHAT_HOME``, the engine switches) are declared in
``switch_rules.SWITCHES``, each with its kind, default, meaning and rule; ``OTHER_VARIABLES`` is
their names.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

from pydantic import BaseModel

from backend.config.renamed import renamed_variables
from backend.config.switch_rules import SWITCH

OTHER_VARIABLES = frozenset(SWITCH)
"""``GEMMA_CHAT_*`` variables that are read, but are not settings."""


def unknown_variables(
    settings: type[BaseModel], prefix: str, environ: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """``(variable, hint)`` for each ``PREFIX*`` variable that names no setting; ``hint`` says
    which one was likely meant (or lists the known ones)."""
    found = []
    for name in sorted(environ if environ is not None else os.environ):
        upper = name.upper()
        if not upper.startswith(prefix) or upper in OTHER_VARIABLES or upper in renamed_variables(prefix):
            continue
        hint = _unknown_part(settings, prefix, upper[len(prefix) :].lower().split("__"))
        if hint is not None:
            found.append((name, hint))
    return found


def _unknown_part(model: type[BaseModel], prefix: str, parts: list[str]) -> str | None:
    """None when ``parts`` name a setting; else a hint for the first part that does not."""
    walked: list[str] = []
    for index, part in enumerate(parts):
        fields = {n: n for n in model.model_fields}
        fields.update({f.alias: n for n, f in model.model_fields.items() if f.alias})
        if part not in fields:
            meant = difflib.get_close_matches(part, list(model.model_fields), n=1)
            if meant:
                return f"Did you mean {prefix}{'__'.join([*walked, meant[0], *parts[index + 1 :]]).upper()}?"
            where = f"under {prefix}{'__'.join(walked).upper()}__" if walked else f"as {prefix}NAME"
            return f"Settings {where}: {', '.join(sorted(model.model_fields))}."
        walked.append(part)
        annotation = model.model_fields[fields[part]].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None  # a value (or a table of free keys, such as keymap or mcp servers)
        model = annotation
    return None
