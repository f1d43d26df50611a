"""What ``gemma-chat ask`` writes: streamed text with a tool timeline, or one JSON document.

Each output makes one ``TurnRenderer`` per engine path; the shared turn pipeline's events reach
it through ``backend.chat.rendering.dispatch``. A renderer's ``exit_code`` is set once its path has ended.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any, TextIO

from backend.chat.rendering import TurnRenderer
from backend.chat.verdict import Verdict
from backend.engine.local.startup import StartupTimings
from backend.engine.protocol import Cancelled, Failed, Finished, Started
from backend.engine.reply_events import ReplyDelta
from backend.errors import GemmaChatError
from backend.gemma4.reply import empty_answer_note
from backend.media.attachment import Attachment
from backend.terminal_text import terminal_safe
from backend.tools.loop import StepLimitReached, ToolFinished, ToolStarted
from backend.tools.runner import ToolRecord
from backend.tools.timeline import timeline_line, tools_summary

REFUSED = ("rejected", "not_running")
"""Failures a user can act on: the engine or server refused the request, or never started."""


def failed_status(event: Failed) -> int:
    """``ask``'s exit status for a failed path: 2 for a refusal (as for a bad flag), 1 otherwise."""
    return 2 if event.reason in REFUSED else 1


class PathOutput(TurnRenderer):
    """One path's part of the output; ``exit_code`` is 0 once it finished or stopped, 2 if it was
    refused, 1 if it failed otherwise."""

    def __init__(self) -> None:
        self.exit_code: int | None = None
        self.records: list[ToolRecord] = []

    async def on_tool_finished(self, event: ToolFinished) -> None:
        self.records.append(event.record)

    def tool_seconds(self) -> float:
        return sum(r.duration_s for r in self.records if not r.reused)


class TextPath(PathOutput):
    """Streams visible text to stdout; errors and the figures line close the path."""

    def __init__(self, console: TextIO, path: str, comparing: bool) -> None:
        super().__init__()
        self.console, self.path, self.comparing = console, path, comparing
        self.after_tool = False
        self.headed = False
        self.thinking = False
        self.dim = sys.stdout.isatty()

    async def on_started(self, event: Started) -> None:
        if self.comparing and not self.headed:  # once per path, though a tool loop sends several requests
            self.headed = True
            sys.stdout.write(f"── {self.path}:\n")

    async def on_delta(self, event: ReplyDelta) -> None:
        if event.thought:
            self._thought(terminal_safe(event.thought))
        piece = terminal_safe(event.text)
        if piece and self.thinking:  # the answer starts below the thought, after a blank line
            self.thinking = False
            piece = "\n\n" + piece.lstrip("\n")
        elif piece and self.after_tool:  # the answer starts below the timeline lines
            piece = "\n" + piece.lstrip("\n")
        self.after_tool = self.after_tool and not piece
        sys.stdout.write(piece)
        sys.stdout.flush()

    def _thought(self, text: str) -> None:
        """Thinking, dimmed on a terminal, its lines marked so a pipe can tell it from the answer."""
        lead = ""
        if not self.thinking:
            self.thinking = True
            lead, text = ("\n" if self.after_tool else "") + "thought: ", text.lstrip("\n")
            self.after_tool = False
        text = text.replace("\n", "\n  ")
        sys.stdout.write(f"{lead}\x1b[2m{text}\x1b[0m" if self.dim else lead + text)
        sys.stdout.flush()

    async def on_tool_started(self, event: ToolStarted) -> None:
        self.thinking = False  # the timeline line starts below the thought

    async def on_tool_finished(self, event: ToolFinished) -> None:
        await super().on_tool_finished(event)
        self.after_tool = True
        sys.stdout.write(terminal_safe(f"\n  {timeline_line(event.record)}"))
        for number, path in enumerate(event.record.images, 1):
            sys.stdout.write(terminal_safe(f"\n    image {number}: {path}"))
        sys.stdout.flush()

    async def on_step_limit(self, event: StepLimitReached) -> None:
        sys.stdout.write(f"\n  (tool step limit of {event.steps} reached)")

    async def on_finished(self, event: Finished) -> None:
        note = empty_answer_note(event.text, event.thought, event.finish_reason)
        if note:
            self.console.write(f"\ngemma-chat: {note}\n")
        self._figures(event)

    async def on_cancelled(self, event: Cancelled) -> None:
        self._figures(event, " · stopped")

    def _figures(self, event: Finished | Cancelled, suffix: str = "") -> None:
        tools = tools_summary(self.records, self.tool_seconds())
        line = event.metrics.summary_line() + (f" · {tools}" if tools else "")
        sys.stdout.write(f"\n── {self.path}: {line}{suffix}\n")
        self.exit_code = 0

    async def on_failed(self, event: Failed) -> None:
        self.console.write(f"\ngemma-chat: {terminal_safe(event.message)}\n")
        self.exit_code = failed_status(event)


class TextPrinter:
    """Progress, errors and approvals go to the console (stderr); replies to stdout."""

    def __init__(self, console: TextIO, comparing: bool = False) -> None:
        self.console = console
        self.comparing = comparing

    def renderer(self, path: str) -> PathOutput:
        return TextPath(self.console, path, self.comparing)

    def progress(self, stage: str) -> None:
        self.console.write(f"gemma-chat: {terminal_safe(stage)}\n")

    def error(self, error: GemmaChatError) -> None:
        self.console.write(f"gemma-chat: {terminal_safe(error.problem)}\n")
        if error.fix:
            self.console.write(f"  fix: {terminal_safe(error.fix)}\n")

    def startup(self, timings: StartupTimings) -> None:
        self.console.write(f"gemma-chat: {timings.line()}\n")

    def compare(self, verdict: Verdict) -> None:
        if not verdict.result.same_paths:
            sys.stdout.write(f"── {verdict.result.differences_line()}\n")
        sys.stdout.write(f"── compare: {verdict.summary()}\n")


class JsonPath(PathOutput):
    def __init__(self, paths: dict[str, Any], path: str) -> None:
        super().__init__()
        self.paths, self.path = paths, path

    async def on_finished(self, event: Finished) -> None:
        self._ended(event, "finished")

    async def on_cancelled(self, event: Cancelled) -> None:
        self._ended(event, "cancelled")

    def _ended(self, event: Finished | Cancelled, status: str) -> None:
        self.paths[self.path] = {
            "reply": event.text,
            "thought": event.thought or None,
            "status": status,
            "figures": asdict(event.metrics),
            "tools": [r.to_json() for r in self.records],
            "tool_seconds": round(self.tool_seconds(), 4),
        }
        self.exit_code = 0

    async def on_failed(self, event: Failed) -> None:
        self.paths[self.path] = {"status": "failed", "error": event.message}
        self.exit_code = failed_status(event)


class JsonReport:
    """``--json``: one document at the end instead of streamed text."""

    def __init__(self, attachments: list[Attachment]) -> None:
        self.doc: dict[str, Any] = {
            "attachments": [_attachment_json(a) for a in attachments],
            "paths": {},
        }
        self.console = sys.stderr

    def renderer(self, path: str) -> PathOutput:
        return JsonPath(self.doc["paths"], path)

    def progress(self, stage: str) -> None:
        return None

    def error(self, error: GemmaChatError) -> None:
        self.doc["error"] = {"problem": error.problem, "fix": error.fix}

    def startup(self, timings: StartupTimings) -> None:
        self.doc["startup"] = timings.to_json()

    def compare(self, verdict: Verdict) -> None:
        result = verdict.result
        self.doc["compare"] = {
            "first": verdict.first,
            "decode_speedup": result.decode_speedup,
            "e2e_speedup": result.e2e_speedup,
            "parity": result.parity.describe(),
            "identical": result.parity.identical,
            "same_paths": result.same_paths,
            "differences": [
                {"name": d.name, "baseline": d.baseline, "optimized": d.optimized} for d in result.differences
            ],
        }

    def emit(self) -> None:
        sys.stdout.write(json.dumps(self.doc, indent=2, ensure_ascii=False, default=str) + "\n")


AskOutput = TextPrinter | JsonReport


def _attachment_json(a: Attachment) -> dict[str, Any]:
    return {"path": str(a.path), "kind": a.kind, "tokens": a.tokens, "detail": a.detail, "sha256": a.sha256}
