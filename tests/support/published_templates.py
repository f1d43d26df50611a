"""The published Gemma 4 chat templates (test data in the workspace's shared/fixtures/gemma4-templates):
the templates a user's model folder or Hugging Face cache may hold. Tests render with them and
check the result; where the folder is missing (a clone without the workspace beside it) those
tests skip, except under CI, where its absence fails them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_WHERE = Path("shared") / "fixtures" / "gemma4-templates"
FOLDER = next(
    (up / _WHERE for up in Path(__file__).resolve().parents if (up / _WHERE).is_dir()),
    Path(__file__).resolve().parents[3] / _WHERE,
)
"""The fixtures folder: in the workspace's shared/ beside the clone (or any folder above it)."""
CURRENT = "e2b-2026-07-09"
"""google/gemma-4-E2B-it's current revision: the one the project's own template must equal."""
REVISIONS = ("launch-2026-04-01", "e2b-2026-04-13", "e2b-2026-04-29", "e2b-2026-07-09", "31b-2026-07-09")


def published(name: str) -> str:
    """The template ``name`` (a file stem of the fixtures folder)."""
    path = FOLDER / f"{name}.jinja"
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: CI must have the shared fixtures beside the clone")
        pytest.skip(f"the published templates are not beside this clone ({FOLDER})")
    return path.read_text()
