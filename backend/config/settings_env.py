"""``GEMMA_CHAT_*`` environment variables checked by name, as config keys are: a variable that
matches no setting (``GEMMA_CHAT_TOOL__ENABLED``, ``GEMMA_CHAT_MAX_TOKEN``) is refused with the
variable's name and the setting it was probably meant for, instead of being ignored in silence.

Variables that are not settings but are read elsewhere (``GEMMA_CHAT_HOME``, the engine switches
below) are listed in ``OTHER_VARIABLES``; a new one must be added there (and a switch's rule to
``switch_rules``, which parses each value strictly).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

from pydantic import BaseModel

OTHER_VARIABLES = frozenset(
    {
        "GEMMA_CHAT_HOME",  # backend/config/paths.py
        "GEMMA_CHAT_GRAPHICS",  # app/tui/graphics.py: kitty or halfblocks, over the detection
        "GEMMA_CHAT_VENV",  # app/bootstrap.py
        "GEMMA_CHAT_ENGINE_BUILD",  # app/bootstrap.py
        "GEMMA_CHAT_INSTALLER",  # app/installer.py: uv or pip, over the automatic choice
        "GEMMA_CHAT_CPU_LINEAR",  # backend/kernels/env.py
        "GEMMA_CHAT_CPU_LINEAR_THREADS",
        "GEMMA_CHAT_CPU_LINEAR_MIN_WEIGHTS",  # backend/kernels/bf16_linear.py
        "GEMMA_CHAT_FORCE_LINEAR",  # backend/kernels/env.py: the bfloat16 linear decision, forced
        "GEMMA_CHAT_NO_PREFILL_DRAFTS",  # backend/compat/*.py
        "GEMMA_CHAT_ONE_CALL_STEP",
        "GEMMA_CHAT_SAMPLED_ROW_DRAFTS",
        "GEMMA_CHAT_UNI_WORKER",
        "GEMMA_CHAT_ROW_EXACT",  # backend/compat/row_exact_linear.py
        "GEMMA_CHAT_ROW_EXACT_ROWS",
        "GEMMA_CHAT_FORCE_ROW_EXACT",
        "GEMMA_CHAT_EAGER_EMBEDDING_PACK",  # backend/compat/embedding_pack.py
        "GEMMA_CHAT_MEMORY_TRACE",  # backend/compat/memory_trace.py
        "GEMMA_CHAT_NO_MALLOC_TRIM",  # backend/compat/malloc_trim.py
        "GEMMA_CHAT_FULL_WARMUP",  # backend/compat/short_warmup.py
        "GEMMA_CHAT_SLOW_STEP_MS",  # backend/compat/slow_steps.py (tests)
        "GEMMA_CHAT_FORCE_HOST_MEMORY_GIB",  # backend/engine/cpu/host_plan.py
        "GEMMA_CHAT_FORCE_SPECULATION_DECISION",  # backend/engine/speculation/first_start.py
        "GEMMA_CHAT_TESTS_SERIAL",  # tests/__main__.py
        "GEMMA_CHAT_OWNER",  # backend/lifetime: the owning process, for watchdogs
        "GEMMA_CHAT_SPECULATION_CHOICES",  # backend/engine/speculation/kept.py
        "GEMMA_CHAT_EARLY_CORE",  # backend/compat/early_core.py: 0/false/off/no turn it off
        "GEMMA_CHAT_LIVE_SPEC_METRICS",  # backend/compat/live_spec_metrics.py
        "GEMMA_CHAT_DRAFT_SCHEDULE",  # backend/compat/draft_schedule.py
    }
)
"""``GEMMA_CHAT_*`` variables that are read, but are not settings."""


def unknown_variables(
    settings: type[BaseModel], prefix: str, environ: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """``(variable, hint)`` for each ``PREFIX*`` variable that names no setting; ``hint`` says
    which one was likely meant (or lists the known ones)."""
    found = []
    for name in sorted(environ if environ is not None else os.environ):
        upper = name.upper()
        if not upper.startswith(prefix) or upper in OTHER_VARIABLES:
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
