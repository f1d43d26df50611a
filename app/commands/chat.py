"""``gemma-chat`` with no command: the Textual chat app."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.commands.ask import settings_from_args


def run_chat(args: argparse.Namespace) -> int:
    from backend.engine_factory import DeferredEngine, new_log_path
    from backend.engine_log import capture_stderr
    from backend.settings import load_settings

    settings = settings_from_args(args)
    if args.data_dir:
        settings = load_settings(
            **{**settings.model_dump(exclude={"engine"}), "data_dir": Path(args.data_dir)}
        )
    name = "demo (generated, random weights)" if settings.demo else settings.model
    from app.tui.app import GemmaChatApp

    app = GemmaChatApp(settings, lambda profile: DeferredEngine(settings, profile), name)
    with capture_stderr(new_log_path("chat")):
        app.run()
    return 0
