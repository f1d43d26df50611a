"""Old setting names still work and say their new ones: ``profile`` in config.toml and
``GEMMA_CHAT_PROFILE`` are ``path`` and ``GEMMA_CHAT_PATH`` now (``backend.config.renamed``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config.settings import load_settings, renamed_in_use


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text(config)
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))
    monkeypatch.delenv("GEMMA_CHAT_PATH", raising=False)
    monkeypatch.delenv("GEMMA_CHAT_PROFILE", raising=False)


def test_profile_in_the_config_file_sets_the_path_and_says_its_new_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _home(tmp_path, monkeypatch, 'profile = "baseline"\n')
    assert load_settings().path == "baseline"
    assert renamed_in_use() == ["the config file's `profile` is now `path` (the old name still works)"]
    assert load_settings(path="eager").path == "eager", "a flag still outranks the file"


def test_path_in_the_config_file_wins_over_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch, 'path = "eager"\nprofile = "baseline"\n')
    assert load_settings().path == "eager"


def test_the_old_variable_sets_the_path_below_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _home(tmp_path, monkeypatch, 'path = "optimized"\n')
    monkeypatch.setenv("GEMMA_CHAT_PROFILE", "baseline")
    assert load_settings().path == "baseline", "the environment outranks the file, old name or new"
    assert renamed_in_use() == ["GEMMA_CHAT_PROFILE is now GEMMA_CHAT_PATH (the old name still works)"]
    monkeypatch.setenv("GEMMA_CHAT_PATH", "eager")
    assert load_settings().path == "eager"


def test_no_note_without_an_old_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch, 'path = "baseline"\n')
    assert load_settings().path == "baseline" and renamed_in_use() == []
