"""``make-model`` deletes and overwrites only what gemma-chat created (issue 64, items 1 and 21):
a folder of the user's files, a file, a path under a file are refused by name before any work;
a full disk, too little memory or an unwritable folder end in one sentence naming the cause."""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.checkpoints import output_folder
from backend.checkpoints.output_folder import OutputFolderRefused, claim, remove_own
from backend.checkpoints.real_weights import DONE
from backend.checkpoints.writer import MANIFEST
from backend.errors import GemmaChatError


def _make_model(*args: str, command: str = "make-model") -> subprocess.CompletedProcess[str]:
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", command, *args],
        capture_output=True,
        text=True,
        env=offline,
        timeout=300,
    )


def _users_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-files"
    (folder / "thesis").mkdir(parents=True)
    (folder / "notes.txt").write_text("years of work")
    (folder / "thesis" / "chapter1.tex").write_text("\\section{One}")
    return folder


def _untouched(folder: Path) -> bool:
    found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    return found == ["notes.txt", "thesis", "thesis/chapter1.tex"]


@pytest.mark.parametrize("mode", [["--real-weights"], ["--size", "tiny"]])
def test_a_folder_of_the_users_files_is_refused_by_name_and_kept(tmp_path: Path, mode: list[str]) -> None:
    folder = _users_folder(tmp_path)
    result = _make_model(str(folder), *mode)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{folder} already holds files gemma-chat did not write (notes.txt, thesis)" in result.stderr
    assert "fix: Name a new or empty folder" in result.stderr
    assert "Internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "downloading" not in result.stdout  # refused before any work
    assert _untouched(folder)
    assert not folder.with_name("my-files.partial").exists()


@pytest.mark.parametrize("mode", [["--real-weights"], ["--size", "tiny"]])
def test_a_file_or_a_path_under_a_file_is_refused_not_an_internal_error(
    tmp_path: Path, mode: list[str]
) -> None:
    a_file = tmp_path / "model.bin"
    a_file.write_text("keep me")
    result = _make_model(str(a_file), *mode)
    assert result.returncode == 2 and f"{a_file} is a file, not a folder" in result.stderr, result.stderr
    under = _make_model(str(a_file / "sub"), *mode)
    assert under.returncode == 2, under.stderr
    assert f"{a_file / 'sub'} cannot be made: {a_file} is a file" in under.stderr
    assert a_file.read_text() == "keep me"


def test_the_staging_folder_is_removed_only_where_gemma_chat_made_it(tmp_path: Path) -> None:
    users = _users_folder(tmp_path)
    with pytest.raises(OutputFolderRefused, match="already holds files gemma-chat did not write"):
        remove_own(users, (DONE,))
    assert _untouched(users)
    ours = tmp_path / "ours.partial"
    output_folder.start_filling(ours)
    (ours / "config.json").write_text("{}")
    remove_own(ours, (DONE,))
    assert not ours.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    remove_own(empty, (DONE,))
    assert not empty.exists()


def test_a_folder_gemma_chat_made_is_its_own_to_replace(tmp_path: Path) -> None:
    assert claim(tmp_path / "new", (MANIFEST,)) is False
    (tmp_path / "empty").mkdir()
    assert claim(tmp_path / "empty", (MANIFEST,)) is False
    made = tmp_path / "made"
    made.mkdir()
    (made / MANIFEST).write_text("{}")
    (made / "model").mkdir()
    assert claim(made, (MANIFEST,)) is True


def test_a_failed_build_leaves_a_folder_the_next_run_may_fill(tmp_path: Path) -> None:
    out = tmp_path / "m"
    output_folder.start_filling(out)
    (out / "model").mkdir()  # what a build that ran out of disk left
    assert claim(out, (MANIFEST,)) is True


def _args(out: Path) -> argparse.Namespace:
    return argparse.Namespace(out=str(out), size="tiny", seed=0, centroids=0, real_weights=False)


@pytest.mark.parametrize(
    ("raised", "phrase"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "is full (or over its quota)"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "is full (or over its quota)"),
        (MemoryError(), "not enough memory to build this checkpoint"),
        (OSError(errno.ENOMEM, "Cannot allocate memory"), "not enough memory to build this checkpoint"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: 8 GB"), "not enough memory"),
        (PermissionError(errno.EACCES, "Permission denied"), "could not be written: Permission denied"),
    ],
)
def test_a_full_disk_or_too_little_memory_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException, phrase: str
) -> None:
    import backend.checkpoints as checkpoints
    from app.commands.make_model import run_make_model

    def failing(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(checkpoints, "make_checkpoint", failing)
    with pytest.raises(GemmaChatError) as refused:
        run_make_model(_args(tmp_path / "m"))
    assert phrase in refused.value.problem and refused.value.fix


def test_a_bug_in_the_build_is_still_reported_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import backend.checkpoints as checkpoints
    from app.commands.make_model import run_make_model

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a shape mismatch")

    monkeypatch.setattr(checkpoints, "make_checkpoint", failing)
    with pytest.raises(RuntimeError, match="a shape mismatch"):
        run_make_model(_args(tmp_path / "m"))


def test_a_log_line_naming_a_folder_outside_the_compile_cache_touches_nothing(tmp_path: Path) -> None:
    from backend.engine.paths import compile_cache

    home = _users_folder(tmp_path)
    (home / "rank_0_0").mkdir()
    log = f"INFO [decorators.py:319] Directly load AOT compilation from path {home}/rank_0_0/model\n"
    assert compile_cache.loaded_entry(log) is None
    assert compile_cache.set_aside(home) is None
    assert (home / "notes.txt").read_text() == "years of work" and (home / "rank_0_0").is_dir()


def test_an_exit_out_of_memory_adds_no_traceback_to_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``ulimit -v`` the memory message was followed by a traceback: listing /proc at exit
    failed with ENOMEM in the handler that ends the children."""
    from backend.lifetime import owner
    from backend.lifetime.watchdog import OWNER_VARIABLE

    def no_memory(*args: object, **kwargs: object) -> list[int]:
        raise OSError(errno.ENOMEM, "Cannot allocate memory", "/proc")

    monkeypatch.setenv(OWNER_VARIABLE, str(os.getpid()))
    monkeypatch.setattr(owner, "end_descendants", no_memory)
    assert owner.end_children() == []


def test_train_demo_into_a_folder_of_the_users_files_is_refused_before_training(tmp_path: Path) -> None:
    folder = _users_folder(tmp_path)
    result = _make_model(str(folder), "--minutes", "0.01", command="train-demo")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "already holds files gemma-chat did not write" in result.stderr
    assert _untouched(folder)
