"""``gemma-chat`` with no command: the Textual chat app."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands.ask import settings_from_args


def run_chat(args: argparse.Namespace) -> int:
    from backend.engine_factory import DeferredEngine, new_log_path
    from backend.engine_log import capture_stderr
    from backend.model_source import DEMO_NAME
    from backend.settings import load_settings

    settings = settings_from_args(args)
    if args.data_dir:
        settings = load_settings(
            **{**settings.model_dump(exclude={"engine"}), "data_dir": Path(args.data_dir)}
        )
    name = DEMO_NAME if settings.demo else settings.model
    from app.tui.app import GemmaChatApp

    app = GemmaChatApp(settings, lambda profile: DeferredEngine(settings, profile), name)
    # multiprocessing's resource tracker passes sys.stderr's fd to its child when it first starts;
    # inside Textual that fd is -1 and vLLM's engine start fails. Start the tracker now.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with capture_stderr(new_log_path("chat")) as terminal:
        # vLLM's processes log to fd 2 (now a file); Textual draws on sys.__stderr__: the terminal.
        saved = sys.__stderr__
        setattr(sys, "__stderr__", terminal)  # noqa: B010 - sys.__stderr__ is Final to type checkers
        try:
            app.run()
        finally:
            setattr(sys, "__stderr__", saved)  # noqa: B010
    return 0
