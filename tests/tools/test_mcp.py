"""MCP servers' tools: configuration (config.toml and Claude-Desktop JSON), the host (stdio and
streamable HTTP servers written with the SDK's server side, ``tests/support/mcp_server.py``), failures
that each give one message, no orphan processes, ``gemma-chat tools``, and a call in the app
through approval and the timeline (fake engine; the real engine's run is in
tests/tools/test_tools_engine.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.tool_block import ToolBlock
from backend.config.settings import McpServerSettings, McpSettings, SettingsError, load_settings
from backend.gemma4.call_format import format_call
from backend.tools.mcp.config import McpConfigError, configured_servers, read_servers_json
from backend.tools.mcp.host import McpHost
from tests.app.tui.test_tui_tools import _scripted, wait_for_dialog
from tests.support.process_tree import alive, descendants_running
from tests.support.tui_pilot import make_app, replies, wait_until

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
ROOT = Path(__file__).resolve().parents[2]


def stdio(mode: str = "ok", timeout_s: float = 15.0) -> McpServerSettings:
    return McpServerSettings(command=sys.executable, args=[str(SERVER), "stdio", mode], timeout_s=timeout_s)


@pytest.fixture
def host_of(tmp_path: Path) -> Iterator[Callable[[dict[str, McpServerSettings]], McpHost]]:
    hosts: list[McpHost] = []

    def make(servers: dict[str, McpServerSettings]) -> McpHost:
        host = McpHost(servers, tmp_path / "logs")
        hosts.append(host)
        host.start()
        assert host.wait_settled(60), "every server settles within its timeout"
        return host

    yield make
    for host in hosts:
        host.close()


def _children() -> set[int]:
    return descendants_running("mcp_server")  # a zombie or an ended child is skipped, not an error


def test_a_claude_desktop_file_reads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}, "type": "stdio"},
                    "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}},
                    "off": {"command": "x", "disabled": True, "alwaysAllow": ["y"]},
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    servers = read_servers_json(path)
    assert servers["git"].command == "uvx" and servers["git"].args == ["mcp-server-git"]
    assert servers["git"].env == {"A": "1"} and servers["git"].enabled
    assert servers["remote"].url == "http://127.0.0.1:9/mcp" and servers["remote"].headers == {"X-Key": "k"}
    assert not servers["off"].enabled
    config = McpSettings.model_validate({"import": str(path), "servers": {"git": stdio()}})
    merged = configured_servers(config)
    assert merged["git"].command == sys.executable, "config.toml's server of the same name wins"
    assert set(merged) == {"git", "remote", "off"}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"mcpServers": {"s": {"type": "sse", "url": "http://x"}}}, "SSE servers are not supported"),
        ({"mcpServers": {"a.b": {"command": "x"}}}, "use letters, digits"),
        ({"mcpServers": {"s": {"command": "x", "url": "http://x"}}}, "either command"),
        ({"servers": {}}, 'no "mcpServers" object'),
    ],
)
def test_bad_server_files_say_what_is_wrong(tmp_path: Path, doc: object, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(McpConfigError, match=message):
        read_servers_json(path)


def test_bad_server_tables_in_config_toml_are_refused(gemma_home: Path) -> None:
    config = gemma_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[mcp.servers.both]\ncommand = "x"\nurl = "http://x"\n')
    try:
        with pytest.raises(SettingsError, match="either command"):
            load_settings()
        config.write_text('[mcp.servers.time]\ncommand = "uvx"\nargs = ["mcp-server-time"]\ntimeout_s = 5\n')
        settings = load_settings()
        assert settings.mcp.servers["time"].args == ["mcp-server-time"]
    finally:
        config.unlink()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def test_stdio_and_http_servers_offer_their_tools_by_server_name(
    host_of: Callable[[dict[str, McpServerSettings]], McpHost], http_server: str
) -> None:
    host = host_of({"local": stdio(), "web": McpServerSettings(url=http_server, timeout_s=15)})
    assert [s.describe() for s in host.statuses()] == ["local: ready, 3 tool(s)", "web: ready, 3 tool(s)"]
    tools = {t.name: t for t in host.tools()}
    assert set(tools) == {f"{s}.{t}" for s in ("local", "web") for t in ("add", "note", "swatch")}
    add = tools["web.add"]
    assert not add.side_effects, "the server marks it read-only" and tools["local.note"].side_effects
    assert add.source == "mcp: web" and add.parameters()["required"] == ["a", "b"]
    assert "title" not in add.parameters()["properties"]["a"]
    assert add.function(a=2, b=40) == "42" and tools["local.note"].function(text="hi") == "noted: hi"
    with pytest.raises(ValueError, match="a: 'x' is not of type 'integer'"):
        add.validate({"a": "x", "b": 1})


def test_an_image_result_is_kept_checked_and_described(
    host_of: Callable[[dict[str, McpServerSettings]], McpHost], gemma_home: Path
) -> None:
    from PIL import Image

    from backend.tools.spec import ToolOutput

    swatch = {t.name: t for t in host_of({"art": stdio()}).tools()}["art.swatch"]
    output = swatch.function(colour="#ff8000")
    assert isinstance(output, ToolOutput)
    assert output.value == "a swatch of #ff8000\n[image 1: image/png 32x16]"
    (kept,) = output.images
    assert Path(kept).parent == gemma_home / "data" / "tool-images"
    with Image.open(kept) as image:
        assert image.size == (32, 16) and image.convert("RGB").getpixel((3, 3)) == (255, 128, 0)
    assert swatch.function(colour="#ff8000").images == (kept,), "one file per distinct image"
    # a header claiming 10 gigapixels is refused before decoding, and said so; nothing is kept
    bomb = swatch.function(colour="#000000", bomb=True)
    assert isinstance(bomb, str) and bomb.startswith("a swatch of #000000\n[image image/png, ")
    assert bomb.endswith("69 bytes, not shown: it is 10000 megapixels, over the 50-megapixel limit]")
    assert len(list(Path(kept).parent.iterdir())) == 1


def test_failing_servers_each_say_why_and_the_others_carry_on(
    host_of: Callable[[dict[str, McpServerSettings]], McpHost],
) -> None:
    started = time.monotonic()
    host = host_of(
        {
            "good": stdio(),
            "exits": stdio("exit"),
            "hangs": stdio("hang", timeout_s=4),
            "garbage": stdio("garbage"),
            "crashes": stdio("crash"),
            "missing": McpServerSettings(command="/nonexistent/mcp-server"),
        }
    )
    assert time.monotonic() - started < 30, "a hanging server costs its timeout, no more"
    states = {s.name: s for s in host.statuses()}
    assert states["good"].state == "ready"
    assert "exited or closed the connection" in states["exits"].message
    assert "no answer within 4 s" in states["hangs"].message
    assert states["missing"].state == "failed" and states["missing"].message
    tools = {t.name: t for t in host.tools()}
    with pytest.raises(Exception, match="its answer is not valid MCP"):
        tools["garbage.odd"].function()
    with pytest.raises(Exception, match="failed running note"):
        tools["crashes.note"].function(text="x")
    assert states["crashes"].state == "ready"  # as of the listing above
    assert {s.name: s.state for s in host.statuses()}["crashes"] == "failed"
    assert "crashes.note" not in {t.name for t in host.tools()}, "a dead server's tools are withdrawn"
    assert tools["good.add"].function(a=1, b=1) == "2", "the good server is untouched"
    host.restart("crashes")
    assert host.wait_settled(30) and {s.name: s.state for s in host.statuses()}["crashes"] == "ready"
    host.disable("good")
    assert host.wait_settled(30)
    deadline = time.monotonic() + 10  # disabling runs on the host's loop: a busy machine takes a moment
    while {s.name: s.state for s in host.statuses()}["good"] != "disabled" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {s.name: s.state for s in host.statuses()}["good"] == "disabled"


def test_no_server_process_outlives_the_host(
    host_of: Callable[[dict[str, McpServerSettings]], McpHost],
) -> None:
    host = host_of({"a": stdio(), "b": stdio()})
    children = _children()
    assert len(children) >= 2
    host.close()
    time.sleep(0.5)
    assert not alive(children)


def test_gemma_chat_tools_lists_every_tool_and_every_failed_server(tmp_path: Path, gemma_home: Path) -> None:
    servers = {
        "mcpServers": {
            "t": {"command": sys.executable, "args": [str(SERVER), "stdio"]},
            "broken": {"command": sys.executable, "args": [str(SERVER), "stdio", "exit"]},
        }
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(servers))

    def tools(*flags: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GEMMA_CHAT_HOME": str(gemma_home)}
        command = [sys.executable, "-m", "app", *flags, "--mcp-config", str(config)]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    run = tools("tools")
    assert run.returncode == 0, run.stderr
    assert "calculator" in run.stdout and "built-in" in run.stdout
    line = next(ln for ln in run.stdout.splitlines() if "t.note" in ln)
    assert "mcp: t" in line and "side effects" in line and "asks first" in line
    assert "t.add" in run.stdout and "broken: failed — it exited" in run.stdout
    listed = json.loads(tools("tools", "--json").stdout)
    assert {"name": "t.add", "source": "mcp: t", "side_effects": False}.items() <= listed["tools"][5].items()
    off = tools("--no-tools", "tools")
    assert off.returncode == 0 and "Tools are off" in off.stdout
    config.write_text("{not json")
    bad = tools("tools")
    assert bad.returncode == 2 and "is not valid JSON" in bad.stderr
    assert not _children()


def _app_calling(tmp_path: Path, server: str, tool: str, arguments: dict[str, object], reply: str):  # type: ignore[no-untyped-def]
    """The app (fake engine) with the test server imported from a Claude-Desktop file as
    ``server``; the model calls ``server.tool(arguments)``, then says ``reply``."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {server: {"command": sys.executable, "args": [str(SERVER), "stdio"]}}})
    )
    call = format_call(f"{server}.{tool}", arguments) + "<|tool_response>"
    factory, engines = _scripted([call, reply])
    app, _ = make_app(tmp_path, factory, mcp=McpSettings.model_validate({"import": str(config)}))
    return app, engines


async def test_an_mcp_call_asks_first_and_shows_its_server_in_the_timeline(tmp_path: Path) -> None:
    app, engines = _app_calling(tmp_path, "t", "note", {"text": "buy milk"}, "Noted.")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.status.mcp == "mcp 1/1")
        assert any(c.title == "MCP: restart t" for c in app.mcp_commands())
        app.query_one(PromptInput).text = "Remember milk"
        await pilot.press("enter")
        await wait_for_dialog(pilot)
        await pilot.press("o")
        await wait_until(pilot, lambda: app.turn is None)
        (block,) = app.query(ToolBlock)
        assert block.record is not None and block.record.status == "ok"
        assert block.record.result == "noted: buy milk" and block.record.name == "t.note"
        assert "<tool:t.note>" in engines["optimized"].requests[0].prompt
        assert "noted: buy milk" in engines["optimized"].requests[1].prompt
        assert replies(app)[0].text.endswith("Noted.")
        children = _children()
        assert children
    time.sleep(0.5)
    assert not alive(children)


async def test_an_image_result_shows_in_its_block_and_reaches_a_model_that_sees(tmp_path: Path) -> None:
    """A read-only call runs without asking; its image is drawn in the opened block, listed with
    its file, and goes to the model with the response (one image placeholder, one payload)."""
    app, engines = _app_calling(tmp_path, "art", "swatch", {"colour": "#00ff00"}, "A green swatch.")
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_until(pilot, lambda: app.status.mcp == "mcp 1/1")
        app.query_one(PromptInput).text = "Draw green"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.turn is None)
        await pilot.pause()
        (block,) = app.query(ToolBlock)
        assert block.record is not None and len(block.record.images) == 1
        assert str(block.title).endswith("ok · 1 image") and not block.collapsed
        (drawn,) = block.query(".tool-image")
        art = drawn.render()
        assert str(art).splitlines() == ["▀" * 32] * 8, "32x16 pixels: two a cell"
        assert "foreground=Color(0, 255, 0)" in repr(art) and "background=Color(0, 255, 0)" in repr(art)
        path = str(block.query_one(".tool-image-path").render())
        assert path == f"image 1: {block.record.images[0]}"
        second = engines["optimized"].requests[1]
        assert "[image 1: image/png 32x16]" in second.prompt and "'images': '<|image|>'" in second.prompt
        assert [image.size for image in second.multi_modal_data["image"]] == [(32, 16)]
        assert replies(app)[0].text.endswith("A green swatch.")
        exported = app.export("markdown").read_text()
        assert f"  ![image 1]({block.record.images[0]})" in exported, "the export links the image"
