"""``python3 -m tests``: set up (with the dev tools) on first use, then lint, type-check and test;
the last line is the wall time, in all and per step."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app import bootstrap

CHECKS: list[tuple[str, list[str]]] = [
    ("ruff check", ["-m", "ruff", "check", "app", "backend", "tests"]),
    ("ruff format", ["-m", "ruff", "format", "--check", "app", "backend", "tests"]),
    ("mypy", ["-m", "mypy"]),
]


ALONE = "cpu_share"
"""Tests that measure how much of a core a thread gets: they run first, with nothing beside them."""
ENGINE = "engine"
SERIAL_ENV = "GEMMA_CHAT_TESTS_SERIAL"
"""Set (to anything) to run pytest as one process, as a run with arguments always does."""
NO_TESTS = 5
"""pytest's exit code when a marker selects no test."""


def _pytest_in_parts(python: str, root: Path) -> int:
    """Every test once, in three selections: the ``cpu_share`` tests alone, then the engine tests
    and all others at once, in two pytest processes.

    Most of an engine test's time is an engine start, and most of that (imports, the engine-core
    process, torch.compile's code generation) keeps one core busy: the other of a 2-core machine
    runs the tests without an engine meanwhile. The engine tests print as they run; the others'
    output follows once both have ended."""
    rest = f"not ({ENGINE} or {ALONE})"
    print(f"== pytest -m '{ALONE}' (alone)", flush=True)
    alone_code = subprocess.call([python, "-m", "pytest", "-m", ALONE], cwd=root)
    print(f"== pytest -m '{ENGINE}' (the other tests run beside it; their output follows)", flush=True)
    with tempfile.TemporaryFile(mode="w+") as others_out:
        others = subprocess.Popen(
            [python, "-m", "pytest", "-m", rest], cwd=root, stdout=others_out, stderr=subprocess.STDOUT
        )
        try:
            engine_code = subprocess.call(
                [python, "-m", "pytest", "-m", f"{ENGINE} and not {ALONE}"], cwd=root
            )
        finally:
            others_code = others.wait()
        others_out.seek(0)
        print(f"== pytest -m '{rest}'", flush=True)
        sys.stdout.write(others_out.read())
    codes = [code for code in (alone_code, engine_code, others_code) if code not in (0, NO_TESTS)]
    return codes[0] if codes else 0


def main() -> int:
    began = time.monotonic()
    took: list[str] = []

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        took.append(f"{name} {now - since:.0f} s")
        return now

    try:
        python = bootstrap.ensure(extras=("dev",))
        root = bootstrap.ROOT
        step = lap("set-up", began)
        for name, args in CHECKS:
            print(f"== {name}", flush=True)
            if subprocess.call([str(python), *args], cwd=root) != 0:
                print(f"== {name} failed", flush=True)
                return 1
            step = lap(name, step)
        if sys.argv[1:] or os.environ.get(SERIAL_ENV):
            print("== pytest", flush=True)
            code = subprocess.call([str(python), "-m", "pytest", *sys.argv[1:]], cwd=root)
        else:
            code = _pytest_in_parts(str(python), root)
        lap("pytest", step)
        return code
    finally:
        print(f"== wall time {time.monotonic() - began:.0f} s ({', '.join(took)})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
