"""Where gemma-chat keeps what it builds: the compiled kernels' folder, shared where asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import locations
from backend.kernels import build


def test_compiled_kernels_go_to_the_shared_folder_where_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(locations.KERNELS_ENV, raising=False)
    assert locations.kernels_dir() == tmp_path / "home" / "cache" / "kernels"
    monkeypatch.setenv(locations.KERNELS_ENV, str(tmp_path / "shared"))
    assert locations.kernels_dir() == tmp_path / "shared"
    assert build._target("bf16_linear", b"source").parent == tmp_path / "shared"
