"""Hardening round 5, item 18: a compile cache folder whose path torch.compile's C++ step cannot
take (a home like /home/o'brien) failed every cold start after 140 s with a compiler error, the
path not named. Now the engine setup refuses it before anything starts, naming the folder, where it
came from, and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.engine.paths.compile_cache import cache_folders, check_cache_folders
from backend.errors import EngineStartFailed


@pytest.mark.parametrize("name", ["o'brien", 'say "hi"', "back\\slash", "new\nline"])
def test_a_cache_root_the_compiler_cannot_take_is_refused_by_name(name: str) -> None:
    folder = f"/tmp/{name}/vllm"
    with pytest.raises(EngineStartFailed) as refused:
        check_cache_folders({"VLLM_CACHE_ROOT": folder})
    assert "VLLM_CACHE_ROOT" in refused.value.problem and "C++" in refused.value.problem
    assert "VLLM_CACHE_ROOT=" in refused.value.fix


def test_the_default_cache_root_under_a_home_with_a_quote_is_refused_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No VLLM_CACHE_ROOT: vLLM's default under the home (or XDG_CACHE_HOME) is what is checked."""
    monkeypatch.setenv("HOME", "/home/o'brien")  # expanduser reads the process's own HOME
    with pytest.raises(EngineStartFailed, match=r"/home/o'brien/\.cache/vllm \(from VLLM_CACHE_ROOT \(unset"):
        check_cache_folders({})
    with pytest.raises(EngineStartFailed, match="TORCHINDUCTOR_CACHE_DIR"):
        check_cache_folders({"VLLM_CACHE_ROOT": "/tmp/ok", "TORCHINDUCTOR_CACHE_DIR": "/tmp/it's"})
    default = cache_folders({"XDG_CACHE_HOME": "/x/cache"})
    assert default == {"VLLM_CACHE_ROOT (unset: the default)": "/x/cache/vllm"}


def test_plain_paths_pass_spaces_and_all(tmp_path: Path) -> None:
    check_cache_folders({"VLLM_CACHE_ROOT": str(tmp_path / "a folder with spaces" / "vllm")})


def test_the_engine_setup_refuses_before_finding_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from backend.config.settings import Settings
    from backend.engine.session import factory

    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "o'brien"))

    def never(settings: object) -> object:
        raise AssertionError("the model was looked for before the cache folder was checked")

    monkeypatch.setattr(factory, "resolve_model", never)
    with pytest.raises(EngineStartFailed, match="o'brien"):
        factory.EngineSetup(Settings(demo=True)).resolved()
