"""The command line's old names still work and say their new ones: ``--profile`` is ``--path``,
``gemma-chat profiles`` is ``gemma-chat paths`` (``app.commands.renamed``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.cli import build_parser


@pytest.mark.parametrize("where", ["before", "after"])
def test_profile_flag_sets_the_path_and_says_its_new_name(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--profile", "baseline"]
    argv = [*flags, "ask", "hi"] if where == "before" else ["ask", *flags, "hi"]
    assert build_parser().parse_args(argv).path == "baseline"
    assert "--profile is now --path" in capsys.readouterr().err
    assert build_parser().parse_args(["ask", "--path", "compare", "hi"]).path == "compare"
    assert capsys.readouterr().err == "", "the new name says nothing"


def test_profile_flag_keeps_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--profile", "fast", "ask", "hi"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_profiles_command_runs_paths_and_says_its_new_name() -> None:
    run = [sys.executable, "-m", "app.cli"]
    old = subprocess.run([*run, "profiles", "--demo"], capture_output=True, text=True, timeout=300)
    new = subprocess.run([*run, "paths", "--demo"], capture_output=True, text=True, timeout=300)
    assert old.returncode == 0 == new.returncode, old.stderr + new.stderr
    assert "`gemma-chat profiles` is now `gemma-chat paths`" in old.stderr
    assert "is now" not in new.stderr
    assert "[optimized] (default)" in old.stdout and old.stdout.count("[baseline]") == 1
