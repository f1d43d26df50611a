"""The suite's two lanes (``python3 -m tests``): each lane's engines on cores of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.__main__ import BIND_ENV, SECOND_LANE, lane_cores


def test_each_lane_binds_its_own_half_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BIND_ENV, raising=False)
    assert lane_cores([0]) is None, "one core: nothing to split"
    assert lane_cores([0, 1]) == ("0", "1")
    assert lane_cores([0, 1, 2]) == ("0", "1-2")
    assert lane_cores(range(16)) == ("0-7", "8-15")
    assert lane_cores([9, 2, 3, 4, 8]) == ("2-3", "4,8-9"), "the CPUs this process may use, in order"
    monkeypatch.setenv(BIND_ENV, "0-1")
    assert lane_cores([0, 1]) is None, "a binding the user set is kept"


def test_every_second_lane_file_exists() -> None:
    root = Path(__file__).resolve().parent.parent
    assert all((root / path).is_file() for path in SECOND_LANE)
