"""Which MCP servers to run: ``[mcp.servers.NAME]`` in config.toml, plus the servers of a
Claude-Desktop-style JSON file (``mcp.import`` or ``--mcp-config``), read unchanged.

The JSON form is ``{"mcpServers": {"NAME": {"command": …, "args": […], "env": {…}}}}`` or, for
a remote server, ``{"url": …, "headers": {…}}`` (``"type": "http"`` / ``"streamable-http"``).
Keys gemma-chat has no use for (``"type": "stdio"``, editors' own keys) are ignored; ``"disabled":
true`` keeps a server off; an SSE server is refused with a message (only streamable HTTP is
spoken). A config.toml server of the same name wins over the file's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from backend.config.file_checks import parse_bounded, read_checked
from backend.config.settings import MCP_SERVER_NAME, McpServerSettings, McpSettings
from backend.errors import GemmaChatError

KNOWN_KEYS = {"command", "args", "env", "cwd", "url", "headers", "timeout_s"}


class McpConfigError(GemmaChatError):
    """An MCP server configuration that cannot be used."""


def configured_servers(settings: McpSettings) -> dict[str, McpServerSettings]:
    """Every configured server by name (enabled or not); ``McpConfigError`` names a bad file or entry."""
    servers: dict[str, McpServerSettings] = {}
    if settings.import_file:
        servers.update(read_servers_json(Path(settings.import_file).expanduser()))
    servers.update(settings.servers)
    return servers


def read_servers_json(path: Path) -> dict[str, McpServerSettings]:
    shown = f"The MCP servers file {path}"
    try:
        doc = parse_bounded(json.loads, read_checked(path).decode("utf-8"), shown)
    except FileNotFoundError:
        raise McpConfigError(f"{shown} does not exist.", "Fix mcp.import or --mcp-config.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise McpConfigError(f"{shown} cannot be read ({error}).") from None
    except json.JSONDecodeError as error:
        raise McpConfigError(f"{shown} is not valid JSON: {error}.") from None
    except ValueError as error:  # not a regular file, too large, nested too deeply
        message = str(error) if str(error).startswith(shown) else f"The MCP servers file {error}"
        raise McpConfigError(f"{message}.", 'Point it at a plain {"mcpServers": …} JSON file.') from None
    entries = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise McpConfigError(
            f'The MCP servers file {path} has no "mcpServers" object.',
            'Expected {"mcpServers": {"NAME": {"command": …, "args": […]}}}.',
        )
    return {name: _server(path, name, entry) for name, entry in entries.items()}


def _server(path: Path, name: str, entry: Any) -> McpServerSettings:
    where = f"The MCP servers file {path}, server {name!r}"
    if not re.match(MCP_SERVER_NAME, name):
        raise McpConfigError(f"{where}: use letters, digits, _ and - in the name (its tools are NAME.tool).")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: expected an object with command or url.")
    kind = str(entry.get("type", "")).lower()
    if kind == "sse":
        raise McpConfigError(
            f"{where}: SSE servers are not supported.", "Use the server's streamable HTTP URL."
        )
    fields = {key: value for key, value in entry.items() if key in KNOWN_KEYS}
    fields["enabled"] = not bool(entry.get("disabled", False))
    try:
        return McpServerSettings.model_validate(fields)
    except ValidationError as error:
        problem = error.errors()[0]
        key = ".".join(str(p) for p in problem["loc"]) or "entry"
        raise McpConfigError(f"{where}: {key}: {problem['msg']}.") from None
