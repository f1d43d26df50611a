"""The set-up: which vLLM build it picks, and that a second run does nothing."""

from __future__ import annotations

import json
import re
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


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_an_old_driver_stops_the_cuda_set_up_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, "535.104.05\\n")
    assert bootstrap.driver_version() == (535, 104, 5)
    with pytest.raises(SystemExit) as stopped:
        bootstrap.check_driver()
    text = str(stopped.value)
    assert "535.104.5" in text and "580.65.6" in text and "GEMMA_CHAT_ENGINE_BUILD=cpu" in text
    assert "nvidia-driver-580" in text
    # the set-up stops before it installs anything
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cuda")
    monkeypatch.setattr(bootstrap, "VENV", tmp_path / "venv")
    monkeypatch.setattr(bootstrap, "_install", lambda *args: pytest.fail("installed despite the old driver"))
    with pytest.raises(SystemExit, match=r"535\.104\.5"):
        bootstrap.ensure()


def test_a_new_enough_driver_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, "580.95.05\\n")
    assert bootstrap.driver_version() == (580, 95, 5)
    bootstrap.check_driver()
    assert bootstrap.driver_problem((525, 60, 13), cuda_major=12) is None
    assert "did not say its version" in (bootstrap.driver_problem(None) or "")


def test_set_up_says_each_stage_and_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(bootstrap, "VENV", venv)
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cpu")
    monkeypatch.delenv("GEMMA_CHAT_INSTALLER", raising=False)
    installed: list[str] = []

    def fake_install(python: Path, spec: str, build: str, say: object) -> str:
        installed.append(spec)
        return "uv"

    monkeypatch.setattr(bootstrap.installer, "install", fake_install)
    monkeypatch.setattr(bootstrap, "_site_packages", lambda venv: site)
    monkeypatch.setattr(bootstrap, "_fix_cpu_build", lambda venv: None)
    monkeypatch.setattr(bootstrap, "_check_engine_imports", lambda venv: None)
    assert bootstrap.ensure() == venv / "bin" / "python"
    assert installed == [f"{bootstrap.ROOT}[cpu]"]
    said = [line.removeprefix("[gemma-chat setup] ") for line in capsys.readouterr().err.splitlines()]
    assert [line.split(":")[0] for line in said[1:4]] == ["set-up 1/3", "set-up 2/3", "set-up 3/3"]
    assert re.fullmatch(r"ready in \d+ s \(environment \d+ s, install with uv \d+ s, check \d+ s\)", said[4])
    assert (venv / bootstrap.STAMP_NAME).is_file() and (site / bootstrap.PTH_NAME).is_file()


def test_a_bad_installer_stops_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bootstrap, "VENV", tmp_path / "venv")
    monkeypatch.setenv("GEMMA_CHAT_ENGINE_BUILD", "cpu")
    monkeypatch.setenv("GEMMA_CHAT_INSTALLER", "conda")
    with pytest.raises(SystemExit, match="GEMMA_CHAT_INSTALLER must be one of"):
        bootstrap.ensure()
    assert not (tmp_path / "venv").exists()
