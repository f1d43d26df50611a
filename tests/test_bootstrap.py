"""The set-up: which vLLM build it picks, and that a second run does nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import bootstrap


def test_build_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cuda")
    assert bootstrap.chosen_build() == "cuda"
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cpu")
    assert bootstrap.chosen_build() == "cpu"
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "tpu")
    with pytest.raises(SystemExit, match="must be one of"):
        bootstrap.chosen_build()


def test_auto_build_follows_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMA_CHAT_ENGINE_BUILD", raising=False)
    monkeypatch.setattr(bootstrap, "has_nvidia_gpu", lambda: True)
    assert bootstrap.chosen_build() == "cuda"
    monkeypatch.setattr(bootstrap, "has_nvidia_gpu", lambda: False)
    assert bootstrap.chosen_build() == "cpu"


def test_second_run_is_a_no_op_when_the_stamp_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    site = tmp_path / "site"
    site.mkdir()
    wanted = bootstrap._wanted("cpu", ("dev",))
    (venv / bootstrap.STAMP_NAME).write_text(json.dumps({**wanted, "site_packages": str(site)}))
    monkeypatch.setattr(bootstrap, "VENV", venv)
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cpu")

    def no_install(*args: object) -> None:
        raise AssertionError("a matching stamp must not install anything")

    monkeypatch.setattr(bootstrap, "_install", no_install)
    assert bootstrap.ensure(("dev",)) == venv / "bin" / "python"
    assert (site / bootstrap.PTH_NAME).read_text() == bootstrap.PTH_LINE, "the hook line is kept current"
    assert not bootstrap._stamp_matches(bootstrap._wanted("cuda", ("dev",)), venv), (
        "another build re-runs set-up"
    )
