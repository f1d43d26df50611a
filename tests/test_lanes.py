"""The suite's two lanes (``python3 -m tests``): each lane's engines on cores of their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.__main__ import BIND_ENV, ENGINE, SECOND_LANE, lane_cores


def test_each_lane_binds_its_own_half_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BIND_ENV, raising=False)
    assert lane_cores([0]) is None, "one core: nothing to split"
    assert lane_cores([0, 1]) == ("0", "1")
    assert lane_cores([0, 1, 2]) == ("0", "1-2")
    assert lane_cores(range(16)) == ("0-7", "8-15")
    assert lane_cores([9, 2, 3, 4, 8]) == ("2-3", "4,8-9"), "the CPUs this process may use, in order"
    monkeypatch.setenv(BIND_ENV, "0-1")
    assert lane_cores([0, 1]) is None, "a binding the user set is kept"


def test_the_second_lane_is_chosen_by_its_marker() -> None:
    """The second lane's engine tests are found by marker wherever their files live: the
    real-weights parity runs are among them, the session engines' tests are not."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", f"{ENGINE} and {SECOND_LANE}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    chosen = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert "tests/engine/test_real_weights_parity.py" in chosen, done.stdout[-2000:]
    assert "tests/engine/local/test_engine_stream.py" not in chosen
