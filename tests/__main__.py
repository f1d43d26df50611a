"""``python3 -m tests``: set up (with the dev tools) on first use, then lint, type-check and test;
the last line is the wall time, in all and per step."""

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


SECOND_LANE = (
    "tests/engine/speculation/test_speculation.py",
    "tests/engine/paths/test_path_graphs.py",
    "tests/app/tui/test_swap.py",
    "tests/kernels/test_cpu_linear.py",
    "tests/app/test_app_entry.py",
    "tests/engine/test_real_weights_parity.py",
)
"""Engine tests that start engines of their own (no session-scoped engine fixture): they run after
the tests without an engine, in that process, so that both cores start engines once those end. The
others of that kind (the demo's training, centroid drafts, the early engine core: ~220 s) run in
the first lane, to keep the lanes even: on 2026-12-07's clean clone, with each lane's engines on a
core of their own, the first lane took 1,235 s and the second 1,680 s (449 s of it without an
engine) before they moved."""


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
    process runs the engine tests that share the session's engines, the other the tests without an
    engine and then the engine tests of ``SECOND_LANE``.

    Most of an engine test's time is an engine start, and most of that (imports, the engine-core
    process, torch.compile's code generation) keeps one core busy: the other core of a 2-core
    machine runs the second lane meanwhile. The first lane prints as it runs; the second lane's
    output follows once both have ended. Each lane's wall time is printed at the end."""
    rest = f"not ({ENGINE} or {ALONE})"
    engine = f"{ENGINE} and not {ALONE}"
    print(f"== pytest -m '{ALONE}' (alone)", flush=True)
    alone_code = subprocess.call([python, "-m", "pytest", "-m", ALONE], cwd=root)
    print(
        f"== pytest -m '{engine}' without the second lane's files (the second lane runs beside it: "
        f"-m '{rest}', then -m '{engine}' {' '.join(SECOND_LANE)}; its output follows)",
        flush=True,
    )
    ignored = [f"--ignore={path}" for path in SECOND_LANE]
    cores = lane_cores(sorted(os.sched_getaffinity(0)))
    first_env, second_env = dict(os.environ), dict(os.environ)
    if cores:
        first_env[BIND_ENV], second_env[BIND_ENV] = cores
        print(f"== the first lane's engines compute on core(s) {cores[0]}, the second's on {cores[1]}")
    began = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as second_out:
        second_script = (
            f"{shlex.quote(python)} -m pytest -m {shlex.quote(rest)}; a=$?; "
            f"{shlex.quote(python)} -m pytest -m {shlex.quote(engine)} {' '.join(SECOND_LANE)}; b=$?; "
            'echo "== second lane ended after $SECONDS s"; '
            "for code in $a $b; do if [ $code -ne 0 ] && [ $code -ne 5 ]; then exit $code; fi; done"
        )
        second = subprocess.Popen(
            ["bash", "-c", second_script],
            cwd=root,
            env=second_env,
            stdout=second_out,
            stderr=subprocess.STDOUT,
        )
        try:
            first_code = subprocess.call(
                [python, "-m", "pytest", "-m", engine, *ignored], cwd=root, env=first_env
            )
            print(f"== first lane ended after {time.monotonic() - began:.0f} s", flush=True)
        finally:
            second_code = second.wait()
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
