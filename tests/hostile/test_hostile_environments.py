"""Hardening round 5, items 12-14: a locale that is not UTF-8 and streams that are not a terminal.
Each runs gemma-chat's command line in a child process, with no engine: the refusals come first,
and ``ask``'s output is checked through the function that prints its progress."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LATIN = "en_US.ISO-8859-1"


@pytest.fixture(scope="module")
def latin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose locale's character set is ISO-8859-1 (compiled with localedef into a
    folder of its own) or, where that cannot be built, plain ASCII (the C locale, UTF-8 mode off)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO", "PYTHONUTF8"))}
    env.pop("LANG", None)
    env |= {"PYTHONPATH": str(ROOT), "GEMMA_CHAT_HOME": str(tmp_path_factory.mktemp("latin-home"))}
    folder = tmp_path_factory.mktemp("locales")
    made = shutil.which("localedef") and subprocess.run(
        ["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(folder / LATIN)],
        capture_output=True,
        timeout=120,
    )
    if made and made.returncode in (0, 1) and (folder / LATIN).exists():
        return env | {"LOCPATH": str(folder), "LC_ALL": LATIN}
    return env | {"LC_ALL": "C", "PYTHONUTF8": "0"}


def _python(env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, encoding="latin-1", timeout=120, cwd=ROOT
    )


def test_the_latin_environment_is_not_utf8(latin_env: dict[str, str]) -> None:
    done = _python(latin_env, "import sys; print(sys.stdout.encoding)")
    assert done.stdout.strip().lower().replace("_", "-") in ("iso8859-1", "ascii"), done


def test_ask_output_in_a_latin_locale_replaces_what_it_cannot_show(latin_env: dict[str, str]) -> None:
    """Round 5 item 13: ``ask`` failed with "'latin-1' codec can't encode character '\\u2026'" (exit 2)
    at its first progress line; now what the character set cannot show is a "?"."""
    code = (
        "from app.commands.environment import tolerant_output\n"
        "tolerant_output()\n"
        "import sys\n"
        "print('gemma-chat: starting the engine\\u2026 caf\\u00e9', file=sys.stderr)\n"
        "print('answer \\u2192 \\U0001f600 done')\n"
    )
    done = _python(latin_env, code)
    assert done.returncode == 0, done.stderr
    assert "starting the engine?" in done.stderr and "answer ? ? done" in done.stdout


def test_the_command_line_makes_its_output_tolerant_before_anything(latin_env: dict[str, str]) -> None:
    """``gemma-chat`` with a refused switch: the refusal holds a character the locale cannot show
    (the value), and is still printed, naming the variable (not a codec error)."""
    env = latin_env | {"GEMMA_CHAT_FORCE_HOST_MEMORY_GIB": "16\u2026"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "paths"], env=env, capture_output=True, timeout=120, cwd=ROOT
    )
    text = done.stderr.decode("latin-1")
    assert done.returncode == 2, text
    assert "GEMMA_CHAT_FORCE_HOST_MEMORY_GIB" in text and "codec" not in text


def test_the_chat_window_refuses_a_latin_terminal_naming_the_locale(latin_env: dict[str, str]) -> None:
    """Round 5 item 12: in an ISO-8859-1 locale the app painted nothing, ignored Ctrl+Q and outlived
    its terminal; now it refuses before any engine, naming the locale and the fix."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "--demo"],
            env=latin_env,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            cwd=ROOT,
        )
        os.close(follower)
        code = process.wait(timeout=120)
        output = _drain(leader).decode("latin-1")
    finally:
        os.close(leader)
    assert code == 2, output
    assert "character set" in output and latin_env["LC_ALL"] in output and "C.UTF-8" in output


def _drain(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_chat_window_needs_a_terminal(tmp_path: Path) -> None:
    """Round 5 item 14: stdin /dev/null and output to a file: the app wrote escape codes into the
    file until killed; now it says it needs a terminal and exits 2, before any engine."""
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GEMMA_CHAT_HOME": str(tmp_path / "home")}
    with open(out, "wb") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "--demo"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            timeout=120,
            cwd=ROOT,
        )
    text = out.read_text(errors="replace")
    assert done.returncode == 2, text
    assert "needs a terminal" in text and "standard input and standard error" in text
    assert "\x1b[" not in text


def test_a_terminal_check_names_only_the_stream_that_is_not_one(tmp_path: Path) -> None:
    from app.commands.environment import check_chat_terminal
    from backend.errors import GemmaChatError

    leader, follower = pty.openpty()
    try:
        with open(follower, "w", encoding="utf-8", closefd=False) as tty, open(tmp_path / "f", "w") as file:
            with pytest.raises(GemmaChatError, match="and standard error is not one"):
                check_chat_terminal(stdin=tty, screen=file)
            check_chat_terminal(stdin=tty, screen=tty)  # a UTF-8 terminal passes
            latin = open(follower, "w", encoding="latin-1", closefd=False)  # noqa: SIM115
            with latin, pytest.raises(GemmaChatError, match="character set is latin-1"):
                check_chat_terminal(stdin=tty, screen=latin)
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.engine
def test_ask_answers_in_a_latin_locale(latin_env: dict[str, str], tmp_path: Path) -> None:
    """Round 5 item 13 as the issue ran it: ``ask --demo`` in an ISO-8859-1 locale failed at its
    first progress line ("starting … engine on demo …\u2026"), exit 2. Now it answers, exit 0."""
    env = latin_env | {"GEMMA_CHAT_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "ask", "--demo", "--path", "eager", "--max-tokens", "8", "def"],
        env=env,
        capture_output=True,
        timeout=300,
        cwd=ROOT,
    )
    err = done.stderr.decode("latin-1")
    assert done.returncode == 0, err
    assert "codec" not in err and "starting the eager engine" in err and done.stdout.strip()
