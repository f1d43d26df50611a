"""``gemma-chat`` with no command: the Textual chat app, built from the command line's flags."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands.environment import check_chat_terminal
from app.commands.flags import settings_from_args

if TYPE_CHECKING:
    from app.tui.app import GemmaChatApp


def build_app(args: argparse.Namespace, log: Path) -> GemmaChatApp:
    """The app exactly as ``gemma-chat`` runs it: flags → settings → model source → engines.

    The engines and the app log to ``log``, so a failed engine start is diagnosed from it and an
    unexpected error's traceback lands beside the engines' output."""
    # multiprocessing's resource tracker passes sys.stderr's fd to its child when it first starts;
    # inside Textual (which replaces sys.stderr) that fd is -1 and vLLM's engine start fails.
    from multiprocessing import resource_tracker

    from app.tui.app import GemmaChatApp
    from app.tui.keymap import check_keymap
    from backend.engine.model.source import DEMO_SHORT_NAME
    from backend.engine.session.factory import EngineSetup, engine_for

    resource_tracker.ensure_running()
    settings = settings_from_args(args)
    check_keymap(settings.keymap)
    name = DEMO_SHORT_NAME if settings.demo else settings.model
    if settings.server:
        name = f"{name} @ {settings.server}"
    setup = EngineSetup(settings)  # the model, drafter and memory plan: found once, before any engine
    return GemmaChatApp(
        settings, lambda path: engine_for(settings, path, log, setup), name, log, swapping=setup.swaps
    )


def run_chat(args: argparse.Namespace) -> int:
    from backend.engine.local.log import capture_stderr
    from backend.engine.session.factory import new_log_path

    log = new_log_path("chat")
    app = build_app(args, log)  # the settings and keymap refused first: they name what to fix
    check_chat_terminal()  # before any engine: keys from a terminal, drawn on one, in UTF-8
    with capture_stderr(log) as terminal:
        # vLLM's processes log to fd 2 (now a file); Textual draws on sys.__stderr__: the terminal.
        saved = sys.__stderr__
        setattr(sys, "__stderr__", terminal)  # noqa: B010 - sys.__stderr__ is Final to type checkers
        try:
            app.run()
        finally:
            setattr(sys, "__stderr__", saved)  # noqa: B010
    if app.fatal is not None or app.return_code not in (None, 0):
        print(f"gemma-chat: {app.fatal or f'the app stopped with an error (see {log})'}", file=sys.stderr)
        return 1
    return 0
