"""Files the app ships in the repository's ``assets/`` folder."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def asset(name: str) -> Path:
    path = ASSETS / name
    if not path.is_file():
        raise FileNotFoundError(f"gemma-chat asset {name} is missing from {ASSETS}")
    return path
