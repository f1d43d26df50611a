"""A full disk is named as one (issue 64, items 26 and 17): ``ask … > /dev/full`` ends with a line
that says the output is full and a failing exit status, not an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.output_failure import EXIT_OUTPUT_FAILED, out_of_space
from tests.support.remote_standin import DEMO_MODEL, Script, Standin

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_ask_into_dev_full_says_the_output_is_full(tmp_path: Path) -> None:
    with Standin(Script()) as standin, open("/dev/full", "w") as full:
        flags = ["--model", str(DEMO_MODEL), "--server", standin.url, "--no-tools", "--max-tokens", "8"]
        run = subprocess.run(
            [sys.executable, "-m", "app.cli", "ask", *flags, "Hi"],
            cwd=ROOT,
            env={**os.environ, "GEMMA_CHAT_HOME": str(tmp_path)},
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert run.returncode == EXIT_OUTPUT_FAILED, run.stderr
    assert (
        "the output could not be written: stdout (/dev/full) is full (No space left on device)" in run.stderr
    )
    assert "Internal error" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr


def test_only_a_want_of_space_is_said_as_one() -> None:
    assert out_of_space(OSError(13, "Permission denied")) is None
    said = out_of_space(OSError(28, "No space left on device", "/x/history.db"))
    assert said is not None
    assert said.startswith("a write failed: No space left on device (/x/history.db). Free space")
