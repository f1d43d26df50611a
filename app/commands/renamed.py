"""The command line's old names, still accepted so no script breaks, each saying its new name once
on stderr: ``--profile`` is now ``--path`` and ``gemma-chat profiles`` is now ``gemma-chat paths``.
Old config keys and variables: ``backend.config.renamed``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def say_renamed(old: str, new: str) -> None:
    sys.stderr.write(f"gemma-chat: {old} is now {new} (the old name still works).\n")


class RenamedFlag(argparse.Action):
    """An old flag: stores into the new flag's destination and says the new name."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        say_renamed(option_string or "", self.new)
        setattr(namespace, self.dest, values)


def run_profiles(args: argparse.Namespace) -> int:
    """``gemma-chat profiles``: says its new name, then runs ``gemma-chat paths``."""
    from app.commands.paths import run_paths

    say_renamed("`gemma-chat profiles`", "`gemma-chat paths`")
    return run_paths(args)
