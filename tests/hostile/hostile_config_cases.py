"""Configuration and flag cases of the hostile corpus (issue 37, items 13-16): every file gemma-chat
reads is checked before it is read, every ``GEMMA_CHAT_*`` variable names a setting, a read-only
home still gets an engine log, and ``--temperature nan`` is refused before any engine starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.hostile_case import Case

DEPTH = 100_000


def config_file_cases(d: Path) -> Iterator[Case]:
    def home_with(id: str, make: object) -> str:
        home = d / f"home-{len(list(d.glob('home-*')))}"
        (home / "config").mkdir(parents=True)
        make(home / "config" / "config.toml")  # type: ignore[operator]
        return str(home)

    def refused(id: str, make: object, *phrases: str) -> Case:
        home = home_with(id, make)
        return Case(
            id, "tests.hostile.hostile_cases:load_config", [home], "refused", ("config.toml", *phrases)
        )

    yield refused(
        "config.toml a symlink to /dev/zero", lambda p: p.symlink_to("/dev/zero"), "character device"
    )
    yield refused("config.toml a FIFO", os.mkfifo, "named pipe (FIFO)")
    yield refused("config.toml a directory", lambda p: p.mkdir(), "a directory")
    yield refused("config.toml of 2 MB", lambda p: p.write_text("# x\n" * 500_000), "more than the 1,048,576")
    yield refused(
        "100,000-deep TOML", lambda p: p.write_text("a = " + "[" * DEPTH + "]" * DEPTH), "nested too deeply"
    )
    yield refused(
        "100,000-deep inline TOML tables", lambda p: p.write_text("a = " + "{b=" * DEPTH + "1" + "}" * DEPTH),
        "nested too deeply",
    )  # fmt: skip

    mcp = d / "mcp"
    mcp.mkdir()
    os.mkfifo(mcp / "fifo.json")
    (mcp / "deep.json").write_text('{"mcpServers": ' + '{"a":' * DEPTH + "1" + "}" * DEPTH + "}")
    (mcp / "zero.json").symlink_to("/dev/zero")

    def mcp_file(id: str, name: str, *phrases: str) -> Case:
        path = str(mcp / name)
        return Case(
            id,
            "tests.hostile.hostile_config:read_mcp_file",
            [path],
            "refused",
            (path, *phrases),
            {"timeout_s": 10},
        )

    yield mcp_file("--mcp-config a FIFO", "fifo.json", "named pipe (FIFO)")
    yield mcp_file("--mcp-config a symlink to /dev/zero", "zero.json", "character device")
    yield mcp_file("100,000-deep MCP JSON", "deep.json", "nested too deeply")


def environment_cases(d: Path) -> Iterator[Case]:
    home = str(d / "env-home")

    def env(id: str, variables: dict[str, str], expect: str, *phrases: str) -> Case:
        return Case(id, "tests.hostile.hostile_config:load_config_env", [home, variables], expect, phrases)

    yield env(
        "GEMMA_CHAT_TOOL__ENABLED (tool, not tools)",
        {"GEMMA_CHAT_TOOL__ENABLED": "false"},
        "refused",
        "GEMMA_CHAT_TOOL__ENABLED is not a setting",
        "Did you mean GEMMA_CHAT_TOOLS__ENABLED?",
    )
    yield env(
        "GEMMA_CHAT_MAX_TOKEN",
        {"GEMMA_CHAT_MAX_TOKEN": "5"},
        "refused",
        "Did you mean GEMMA_CHAT_MAX_TOKENS?",
    )
    yield env(
        "GEMMA_CHAT_TOOLS__ALLOWED_DIRS not JSON",
        {"GEMMA_CHAT_TOOLS__ALLOWED_DIRS": "/tmp"},
        "refused",
        "GEMMA_CHAT_TOOLS__ALLOWED_DIRS has a value",
        "'[\"/tmp\"]'",
    )
    yield env(
        "a bad value names its variable",
        {"GEMMA_CHAT_MAX_TOKENS": "many"},
        "refused",
        "GEMMA_CHAT_MAX_TOKENS",
    )
    yield env(
        "well-formed variables pass",
        {"GEMMA_CHAT_TOOLS__ENABLED": "false", "GEMMA_CHAT_MAX_TOKENS": "7", "GEMMA_CHAT_CPU_LINEAR": "0"},
        "ok",
        "tools.enabled=False max_tokens=7",
    )
    yield Case(
        "a read-only GEMMA_CHAT_HOME still gets an engine log",
        "tests.hostile.hostile_config:engine_log_in_read_only_home",
        [str(d / "read-only-home")],
        "ok",
        ("the engine speaks",),
        {"timeout_s": 60},
    )
    for value in ("nan", "inf", "-inf", "-1"):
        yield Case(
            f"--temperature {value}",
            "tests.hostile.hostile_config:ask_flags",
            [f"--temperature={value}", "hi"],
            "refused",
            ("exit 2", f"--temperature: '{value}'", "finite number"),
        )


def keymap_cases(d: Path) -> Iterator[Case]:
    def keymap(id: str, entry: str, *phrases: str) -> Case:
        home = str(d / f"keymap-{len(list(d.glob('keymap-*')))}")
        (d / home).mkdir(parents=True)
        call = "tests.hostile.hostile_config:chat_app_with_keymap"
        return Case(id, call, [home, entry], "refused", ("[keymap]", *phrases), {"timeout_s": 40})

    yield keymap(
        "an unknown binding id", 'togle_path = "f6"', "togle_path is not a binding id", "toggle_path"
    )
    yield keymap("a key that does not exist", 'toggle_path = "f99"', "'f99' is not a key")
    yield keymap("an unknown modifier", 'toggle_path = "crtl+t"', "'crtl' is not a modifier")
    # round 4 (issue 55, item 10): a key another binding presses, a key that types text
    yield keymap("a key compare already has", 'toggle_path = "f3"', "'f3' already presses compare")
    yield keymap("quit on a letter", 'quit = "q"', "'q' types text in the prompt")
    yield keymap("drafts on a letter", 'show_drafts = "e"', "'e' types text in the prompt")
