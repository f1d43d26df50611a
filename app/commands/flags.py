"""The command line's flags → ``Settings``: the one place every command (and the chat app) gets them.

Flags override the environment, which overrides the config file; a flag that was not given
leaves the value from below. An old setting name (``profile``) works and is named anew on stderr
(``backend.config.renamed``). A model trained without tool calls (the demo) gets tools switched
off here, so every command offers the model the same thing.
"""

from __future__ import annotations

import argparse
import sys

from backend.config.settings import Settings, load_settings, renamed_in_use
from backend.engine.model.source import calls_tools

COMPARE = "compare"
"""``--path compare``: both paths, then the comparison (ask, and the chat app's first turn)."""


def settings_from_args(args: argparse.Namespace) -> Settings:
    settings = load_settings(
        model=args.model,
        demo=args.demo,
        path=None if args.path == COMPARE else args.path,
        data_dir=args.data_dir,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        kv_cache_gib=args.kv_cache_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
        speculation=args.speculation,
        draft_tokens=args.draft_tokens,
        drafter=getattr(args, "drafter", None),
        server=getattr(args, "server", None),
        baseline_server=getattr(args, "baseline_server", None),
        api_key=getattr(args, "api_key", None),
        think=getattr(args, "think", None),
    )
    for note in renamed_in_use():  # an old setting name: it works, and says its new one
        sys.stderr.write(f"gemma-chat: {note}.\n")
    if getattr(args, "mcp_config", None):
        mcp = settings.mcp.model_copy(update={"import_file": args.mcp_config})
        settings = settings.model_copy(update={"mcp": mcp})
    off = getattr(args, "no_tools", False)
    if settings.tools.enabled and (off or not calls_tools(settings.model, settings.demo)):
        settings = settings.model_copy(update={"tools": settings.tools.model_copy(update={"enabled": False})})
    return settings
