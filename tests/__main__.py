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


ALONE = "engine or cpu_share"
"""The tests of the first part: real engines, and the tests that measure a core's share (which
the engines would take from them)."""
SERIAL_ENV = "GEMMA_CHAT_TESTS_SERIAL"
"""Set (to anything) to run pytest as one process, as a run with arguments always does."""


def _pytest_in_two_parts(python: str, root: Path) -> int:
    """The engine tests and the others at once, in two pytest processes.

    Most of an engine test's time is an engine start, and most of that (imports, the engine-core
    process, torch.compile's code generation) keeps one core busy: the other of a 2-core machine
    runs the tests without an engine meanwhile. The engine tests print as they run; the others'
    output follows once both have ended. Together they are every test, as one run would be
    (``-m X`` and ``-m "not (X)"``)."""
    print(f"== pytest -m '{ALONE}' (the other tests run beside it; their output follows)", flush=True)
    with tempfile.TemporaryFile(mode="w+") as others_out:
        others = subprocess.Popen(
            [python, "-m", "pytest", "-m", f"not ({ALONE})"],
            cwd=root,
            stdout=others_out,
            stderr=subprocess.STDOUT,
        )
        try:
            engine_code = subprocess.call([python, "-m", "pytest", "-m", ALONE], cwd=root)
        finally:
            others_code = others.wait()
        others_out.seek(0)
        print(f"== pytest -m 'not ({ALONE})'", flush=True)
        sys.stdout.write(others_out.read())
    return engine_code or others_code


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
            code = _pytest_in_two_parts(str(python), root)
        lap("pytest", step)
        return code
    finally:
        print(f"== wall time {time.monotonic() - began:.0f} s ({', '.join(took)})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
