"""``python3 -m tests``: set up (with the dev tools) on first use, then lint, type-check and test;
the last line is the wall time, in all and per step.

tests/ mirrors the source (``tests/engine/local/`` tests ``backend/engine/local/``, ``tests/app/tui/``
``app/tui/``); ``tests/hostile/`` holds the hostile-input corpus and its tests, ``tests/support/`` the
fakes, fake servers and helpers that are not tests. Without arguments pytest runs in lanes chosen by
marker, not by folder or file: ``cpu_share`` alone first; then, side by side, the first lane
(``engine`` tests not marked ``second_lane``: they share the session's engines) and the second (the
tests without ``engine``, then the ``engine`` tests marked ``second_lane``: engines of their own).
Both lanes share one folder of compiled kernels (``GEMMA_CHAT_KERNELS_DIR``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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


SECOND_LANE = "second_lane"
"""The marker of the engine tests that start engines of their own (no session-scoped engine fixture),
set in their files (``pytestmark``): they run after the tests without an engine, in that process, so
that both cores start engines once those end; every other engine test runs in the first lane. Both
real-weights files are here (one checkout of the weights, one process): with the one-pass kernels
compiled once per run, not once per home, the first lane was the longer by about 3 minutes."""
KERNELS_ENV = "GEMMA_CHAT_KERNELS_DIR"
"""Both lanes keep compiled kernels in one folder of the run's (``backend.config.locations``)."""


BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


def lane_cores(cpus: Sequence[int]) -> tuple[str, str] | None:
    """The CPUs each lane's engines compute on (vLLM's ``VLLM_CPU_OMP_THREADS_BIND``): the first
    half of ``cpus`` (this process's allowed CPUs) and the second half. Left to vLLM ("auto"),
    every engine of both lanes binds the first core (the last is kept for the front end): two
    lanes' engines then share one core. Measured on a 2-core EPYC (avx512_bf16), two demo engines
    started side by side: 89-90 tok/s each and 23 s in the engine-core stage on core 0, 130-136
    tok/s and 14 s on cores 0 and 1 (184 tok/s alone). None on one CPU, or where the user bound
    the engines already."""
    if len(cpus) < 2 or os.environ.get(BIND_ENV):
        return None
    ordered = sorted(cpus)
    half = len(ordered) // 2
    return _id_list(ordered[:half]), _id_list(ordered[half:])


def _id_list(cpus: Sequence[int]) -> str:
    """``cpus`` as vLLM reads a CPU list: runs as ranges, joined by commas (``0-3,8``)."""
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _pytest_in_parts(python: str, root: Path) -> int:
    """Every test once, in two lanes after the ``cpu_share`` tests have run alone: one pytest
    process runs the engine tests (``-m engine``) that share the session's engines, the other the
    tests without an engine and then the engine tests marked ``second_lane``. A new engine test goes
    to the first lane unless its file says ``pytestmark = pytest.mark.second_lane``; the lanes are
    chosen by marker, never by file name, so moving a file changes nothing.

    Most of an engine test's time is an engine start, and most of that (imports, the engine-core
    process, torch.compile's code generation) keeps one core busy: the other core of a 2-core
    machine runs the second lane meanwhile. The first lane prints as it runs; the second lane's
    output follows once both have ended. Each lane's wall time is printed at the end."""
    rest = f"not ({ENGINE} or {ALONE})"
    first = f"{ENGINE} and not ({SECOND_LANE} or {ALONE})"
    second = f"{ENGINE} and {SECOND_LANE} and not {ALONE}"
    print(f"== pytest -m '{ALONE}' (alone)", flush=True)
    alone_code = subprocess.call([python, "-m", "pytest", "-m", ALONE], cwd=root)
    print(
        f"== pytest -m '{first}' (the second lane runs beside it: -m '{rest}', then -m '{second}'; "
        "its output follows)",
        flush=True,
    )
    cores = lane_cores(sorted(os.sched_getaffinity(0)))
    first_env, second_env = dict(os.environ), dict(os.environ)
    if cores:
        first_env[BIND_ENV], second_env[BIND_ENV] = cores
        print(f"== the first lane's engines compute on core(s) {cores[0]}, the second's on {cores[1]}")
    began = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as second_out:
        second_script = (
            f"{shlex.quote(python)} -m pytest -m {shlex.quote(rest)}; a=$?; "
            f"{shlex.quote(python)} -m pytest -m {shlex.quote(second)}; b=$?; "
            'echo "== second lane ended after $SECONDS s"; '
            "for code in $a $b; do if [ $code -ne 0 ] && [ $code -ne 5 ]; then exit $code; fi; done"
        )
        second_lane = subprocess.Popen(
            ["bash", "-c", second_script],
            cwd=root,
            env=second_env,
            stdout=second_out,
            stderr=subprocess.STDOUT,
        )
        try:
            first_code = subprocess.call([python, "-m", "pytest", "-m", first], cwd=root, env=first_env)
            print(f"== first lane ended after {time.monotonic() - began:.0f} s", flush=True)
        finally:
            second_code = second_lane.wait()
        second_out.seek(0)
        print("== second lane", flush=True)
        sys.stdout.write(second_out.read())
    codes = [code for code in (alone_code, first_code, second_code) if code not in (0, NO_TESTS)]
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
        kernels = tempfile.TemporaryDirectory(prefix="gemma-chat-kernels-")
        os.environ.setdefault(KERNELS_ENV, kernels.name)  # one build per run, shared by the lanes
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
