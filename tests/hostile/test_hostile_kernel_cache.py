"""Hardening round 3: the compiled kernel in the cache is input. A truncated library made every
optimized start fail without naming it; a directory in its place, or a file where the kernels'
folder belongs, was an internal error. Each is set aside (named in a notice) and built again."""

from __future__ import annotations

import platform
import shutil
from pathlib import Path

import pytest

from backend.config import cache_json
from backend.kernels import build

pytestmark = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")) or platform.machine() not in ("x86_64", "AMD64"),
    reason="the kernel is built with a C compiler, for x86-64",
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(build.locations, "cache_dir", lambda: tmp_path)
    monkeypatch.delenv(build.locations.KERNELS_ENV, raising=False)  # the cache folder's own, not the run's
    cache_json.take_notices()
    return tmp_path


def _rebuilt(kernel: Path, said: str) -> None:
    again = build.compiled("bf16_linear")
    assert again == kernel and build._elf_complete(again) == ""
    notices = cache_json.take_notices()
    assert len(notices) == 1 and str(kernel.name) in notices[0] and said in notices[0]


def test_a_truncated_kernel_is_set_aside_and_built_again(cache: Path) -> None:
    kernel = build.compiled("bf16_linear")
    assert build._elf_complete(kernel) == "" and not cache_json.take_notices()
    whole = kernel.read_bytes()
    kernel.write_bytes(whole[: len(whole) // 2])
    _rebuilt(kernel, "truncated")
    kernel.write_bytes(b"")
    _rebuilt(kernel, "not a 64-bit ELF")


def test_a_directory_in_the_kernels_place_is_set_aside(cache: Path) -> None:
    kernel = build.compiled("bf16_linear")
    kernel.unlink()
    kernel.mkdir()
    _rebuilt(kernel, "not a file")


def test_a_file_in_the_kernels_folders_place_is_set_aside(cache: Path) -> None:
    (cache / "kernels").write_text("not a folder")
    kernel = build.compiled("bf16_linear")
    assert build._elf_complete(kernel) == ""
    notices = cache_json.take_notices()
    assert len(notices) == 1 and "kernels' folder" in notices[0]
