"""``ask <&-`` with a tool that needs approval (issue 64, item 20): stdin closed (``sys.stdin`` is
None), a closed file, a pipe or a file — each a clear decline naming ``--yes``, never an
``AttributeError``."""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from typing import Any

import pytest

from app.commands.ask import _approver
from backend.gemma4.tool_call import ToolCall
from backend.tools.spec import Tool


def _decide(stdin: Any, monkeypatch: pytest.MonkeyPatch, yes: bool = False) -> tuple[str, str]:
    monkeypatch.setattr(sys, "stdin", stdin)
    console = io.StringIO()
    tool = Tool("write_note", "Writes a note.", lambda **_: None, None, side_effects=True)
    decision = asyncio.run(_approver(argparse.Namespace(yes=yes), console)(ToolCall("write_note", {}), tool))
    return decision, console.getvalue()


def _closed() -> io.StringIO:
    stream = io.StringIO()
    stream.close()
    return stream


@pytest.mark.parametrize("stdin", [None, _closed(), io.StringIO("o\n")], ids=["<&-", "closed", "a file"])
def test_no_terminal_to_ask_on_declines_and_names_yes(stdin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    decision, said = _decide(stdin, monkeypatch)
    assert decision == "deny"
    assert "denied write_note" in said and "stdin is not a terminal" in said and "--yes" in said


def test_yes_allows_without_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _decide(None, monkeypatch, yes=True) == ("once", "")
