"""What the hostile corpus's MCP cases run (in a forked child of ``tests.hostile.hostile_worker``): the MCP
host against ``tests/support/mcp_raw_server.py`` in one of its modes."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_raw_server.py")


def _host(mode: str, log_dir: str, timeout_s: float = 10.0):  # type: ignore[no-untyped-def]
    from backend.config.settings import McpServerSettings
    from backend.tools.mcp.host import McpHost

    settings = McpServerSettings(command=sys.executable, args=[SERVER, mode], timeout_s=timeout_s)
    host = McpHost({"srv": settings}, Path(log_dir))
    host.start()
    host.wait_settled()
    return host


def colliding_names(log_dir: str) -> str:
    """Every tool gets its own name, and a call by each name reaches that tool."""
    from tests.support.mcp_raw_server import COLLIDING

    host = _host("collide", log_dir)
    try:
        (status,) = host.statuses()
        tools = {t.name: t for t in host.tools()}
        if len(tools) != len(COLLIDING):
            raise AssertionError(f"{len(COLLIDING)} tools became {len(tools)} names: {sorted(tools)}")
        reached = {name: tool.function() for name, tool in tools.items()}
    finally:
        host.close()
    if sorted(text.removeprefix("ran ") for text in reached.values()) != sorted(COLLIDING):
        raise AssertionError(f"calls reached the wrong tools: {reached}")
    return status.describe()


def server_state(mode: str, log_dir: str) -> str:
    """The server's state after start (a failed one raises with its reason)."""
    host = _host(mode, log_dir)
    try:
        (status,) = host.statuses()
    finally:
        host.close()
    if status.state != "ready":
        raise ValueError(status.describe())
    return status.describe()


def call_result(mode: str, log_dir: str) -> str:
    """Call the server's first tool; its failure raises with the message the model would read."""
    host = _host(mode, log_dir)
    try:
        (tool,) = host.tools()
        return str(tool.function(q="x"))[:200]
    finally:
        host.close()


def many_tools_turn(log_dir: str, model_dir: str) -> str:
    """A two-word prompt with 500 MCP tools offered, on a 4,096-token window: the turn is refused
    before it is sent, and the message must blame the declarations, not the prompt."""
    from backend.chat.pipeline import FixedPrompt, TurnOptions, TurnPipeline
    from backend.config.settings import Settings
    from backend.engine.protocol import EngineInfo, PathEngine, SamplingSettings
    from backend.gemma4.messages import ChatMessage, PromptRenderer
    from backend.tools.from_settings import tool_runner

    class Renderer:
        def __init__(self) -> None:
            self.renderer = PromptRenderer.for_model(model_dir)

        def render(self, messages, tools=None, *, think=False):  # type: ignore[no-untyped-def]
            return self.renderer.render(messages, tools, think=think)

    host = _host("many", log_dir)
    try:
        runner = tool_runner(Settings(data_dir=Path(log_dir)), mcp=host)
        pipeline = TurnPipeline(
            FixedPrompt([ChatMessage("user", "hi")]),
            TurnOptions(sampling=SamplingSettings(max_tokens=256)),
            tools=runner,
        )
        info = EngineInfo("demo", 4096, frozenset({"text"}), {})
        pipeline.check(PathEngine("optimized", Renderer(), info))  # type: ignore[arg-type]
    finally:
        host.close()
    return "the turn was sent"


def tools_command(home: str, python: str, mode: str = "noise") -> str:
    """``gemma-chat tools`` with a server in MODE (``noise``: non-JSON lines on stdout;
    ``escapes``: escape sequences in a tool's name and description): no traceback, and no
    control character reaches the terminal."""
    import json
    import os
    import subprocess

    config = Path(home) / "mcp.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {"srv": {"command": python, "args": [SERVER, mode]}}}))
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [python, "-m", "app.cli", "tools", "--mcp-config", str(config)],
        cwd=root,
        env={**os.environ, "GEMMA_CHAT_HOME": home},
        capture_output=True,
        text=True,
        timeout=40,
    )
    out = run.stdout + run.stderr
    raw = sorted({f"{ord(c):#04x}" for c in out if ord(c) < 0x20 and c not in "\n\t"})
    if "Traceback" in out or run.returncode != 0 or raw:
        raise AssertionError(f"control characters {raw}: {out[-1500:]!r}")
    return out[-600:]
