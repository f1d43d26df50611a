"""What the hostile corpus's configuration cases run (in a forked child of ``tests.hostile.hostile_worker``):
config files and MCP server files that are not plain files or are nested 100,000 deep, mistyped
``GEMMA_CHAT_*`` variables, a read-only ``GEMMA_CHAT_HOME``, ``--temperature nan``."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_config_env(home: str, env: dict[str, str]) -> str:
    """Settings with ``env`` set (and any other GEMMA_CHAT_* variable of the test run removed)."""
    for name in [n for n in os.environ if n.startswith("GEMMA_CHAT_")]:
        del os.environ[name]
    os.environ.update({**env, "GEMMA_CHAT_HOME": home})
    from backend.config.settings import load_settings

    settings = load_settings()
    return f"tools.enabled={settings.tools.enabled} max_tokens={settings.max_tokens}"


def read_mcp_file(path: str) -> str:
    from backend.tools.mcp.config import read_servers_json

    return str(sorted(read_servers_json(Path(path))))


def ask_flags(*words: str) -> str:
    """``gemma-chat ask WORDS`` as parsed: a refusal is argparse's message (exit 2), before any engine."""
    from app.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(["ask", *words])
    except SystemExit as exit:
        raise ValueError(f"exit {exit.code}: {err.getvalue().strip()}") from None
    return f"temperature={args.temperature}"


PROBE = (
    "import os\nfrom backend.engine.session.factory import new_log_path\n"
    "from backend.engine.local.log import capture_stderr\n"
    "path = new_log_path('ask')\n"
    "with capture_stderr(path):\n    os.write(2, b'the engine speaks')\n"
    "print(path, path.read_text())\n"
)


def engine_log_in_read_only_home(home: str) -> str:
    """A read-only GEMMA_CHAT_HOME (a read-only bind mount in a mount namespace where that is
    allowed, else a home whose cache folder is a file): the engine log must still be written."""
    Path(home).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GEMMA_CHAT_HOME": home, "PYTHONPATH": str(ROOT)}
    mount = f"mount --bind {home} {home} && mount -o remount,ro,bind {home} {home}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"{mount} && touch {home}/x"], capture_output=True)
    if probe.returncode == 0 or b"Read-only" not in probe.stderr:
        (Path(home) / "cache").write_text("a file where the cache folder should be")
        command = [sys.executable, "-c", PROBE]
        how = "cache is a file"
    else:
        command = ["unshare", "-m", "sh", "-c", f'{mount} && {sys.executable} -c "$PROBE"']
        env["PROBE"] = PROBE
        how = "read-only mount"
    run = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise AssertionError(f"({how}) {run.stderr[-800:]}")
    if "the engine speaks" not in run.stdout:
        raise AssertionError(f"({how}) the engine's output was lost: {run.stdout!r}")
    return f"({how}) {run.stdout.strip()}"


CHAT_FLAGS = ["--demo", "--server", "http://127.0.0.1:9", "--no-tools"]


def chat_app_with_keymap(home: str, keymap: str) -> str:
    """``gemma-chat --demo`` with ``[keymap]`` KEYMAP in config.toml: a mistake is refused (exit 2)
    before the app starts. The app is pointed at a server that is not there, so that no engine
    process is started even where the check is missing."""
    config = Path(home) / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[keymap]\n{keymap}\n")
    run = subprocess.run(
        [sys.executable, "-m", "app.cli", *CHAT_FLAGS],
        env={**os.environ, "GEMMA_CHAT_HOME": home, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    if run.returncode == 2:
        raise ValueError(run.stderr.strip())
    return f"exit {run.returncode}: {run.stderr.strip()[-300:]}"
