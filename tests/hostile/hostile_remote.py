"""What the hostile corpus's remote-server cases run (in a forked child of ``tests.hostile.hostile_worker``):
a ``RemoteEngine`` against the scripted stand-in (``tests/support/remote_standin.py``), and ``gemma-chat
ask --server`` against it. A refusal or a failed turn raises with its message; an ``AssertionError``
marks text that reached the terminal raw."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.remote_standin import DEMO_MODEL, Script, Standin

ROOT = Path(__file__).resolve().parents[2]


def remote_turn(
    script: dict[str, Any], deadlines: dict[str, float] | None = None, max_tokens: int = 16
) -> str:
    """Connect, run one turn; return the notes and the reply, or raise with the failure."""
    from backend.engine.protocol import EngineRequest, Failed, Finished, SamplingSettings
    from backend.engine.remote.engine import RemoteEngine
    from backend.gemma4.messages import ChatMessage

    try:
        from backend.engine.remote.checks import Deadlines

        more: dict[str, Any] = {"deadlines": Deadlines(**(deadlines or {}))}
    except ImportError:  # the code before issue 37 (to see each case fail without its fix)
        more = {}

    async def run(url: str) -> str:
        notes: list[str] = []
        engine = RemoteEngine(url, DEMO_MODEL, **more)
        await engine.start(notes.append)
        try:
            prompt = engine.render([ChatMessage("user", "Hi")]).text
            request = EngineRequest("r", prompt, sampling=SamplingSettings(max_tokens=max_tokens))
            events = [event async for event in engine.stream(request)]
        finally:
            await engine.shutdown()
        final = events[-1]
        if isinstance(final, Failed):
            raise ValueError(final.message)
        assert isinstance(final, Finished), final
        return f"{'; '.join(notes)} | {len(final.token_ids)} tokens: {final.text!r}"

    with Standin(Script(**script)) as standin:
        return asyncio.run(run(standin.url))


def ask_remote(script: dict[str, Any], home: str) -> str:
    """``gemma-chat ask --server URL`` as a user runs it: no escape or control byte may reach the
    terminal (stdout or stderr) from the reply."""
    with Standin(Script(**script)) as standin:
        flags = ["--model", str(DEMO_MODEL), "--server", standin.url, "--no-tools", "--max-tokens", "64"]
        run = subprocess.run(
            [sys.executable, "-m", "app.cli", "ask", *flags, "Hi"],
            cwd=ROOT,
            env={**os.environ, "GEMMA_CHAT_HOME": home},
            capture_output=True,
            timeout=60,
        )
    out = run.stdout + run.stderr
    raw = sorted({f"{b:#04x}" for b in out if b < 0x20 and b not in (0x0A, 0x09)})
    if raw:
        raise AssertionError(f"control bytes {raw} reached the terminal: {out[-400:]!r}")
    if run.returncode != 0:
        raise ValueError(out.decode(errors="replace")[-600:])
    return out.decode()[-400:]
