"""``python3 -m tests``: set up (with the dev tools) on first use, then lint, type-check and test."""

from __future__ import annotations

import subprocess
import sys

from app import bootstrap

CHECKS: list[tuple[str, list[str]]] = [
    ("ruff check", ["-m", "ruff", "check", "app", "backend", "tests"]),
    ("ruff format", ["-m", "ruff", "format", "--check", "app", "backend", "tests"]),
    ("mypy", ["-m", "mypy"]),
]


def main() -> int:
    python = bootstrap.ensure(extras=("dev",))
    root = bootstrap.ROOT
    for name, args in CHECKS:
        print(f"== {name}", flush=True)
        if subprocess.call([str(python), *args], cwd=root) != 0:
            print(f"== {name} failed", flush=True)
            return 1
    print("== pytest", flush=True)
    return subprocess.call([str(python), "-m", "pytest", *sys.argv[1:]], cwd=root)


if __name__ == "__main__":
    sys.exit(main())
