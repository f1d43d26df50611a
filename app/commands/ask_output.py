"""What ``gemma-chat ask`` writes: streamed text with a tool timeline, or one JSON document."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any, TextIO

from backend.compare import CompareResult
from backend.engine import Cancelled, Delta, Failed, Finished, Started
from backend.errors import GemmaChatError
from backend.media.attachment import Attachment
from backend.tools.gemma_format import VisibleStream
from backend.tools.loop import StepLimitReached, ToolFinished, ToolStarted
from backend.tools.runner import ToolRecord
from backend.tools.timeline import timeline_line, tools_summary


class TextPrinter:
    """Streams visible text to stdout; progress, errors and approvals go to the console (stderr)."""

    def __init__(self, console: TextIO, comparing: bool = False) -> None:
        self.console = console
        self.comparing = comparing
        self.stream = VisibleStream()
        self.records: list[ToolRecord] = []
        self.headed: set[str] = set()
        self.after_tool = False

    def progress(self, stage: str) -> None:
        self.console.write(f"gemma-chat: {stage}\n")

    def error(self, error: GemmaChatError) -> None:
        self.console.write(f"gemma-chat: {error.problem}\n")
        if error.fix:
            self.console.write(f"  fix: {error.fix}\n")

    def event(self, path: str, event: Any) -> int | None:
        """Print one event; return an exit code once the turn has ended."""
        if isinstance(event, Started) and self.comparing and path not in self.headed:
            self.headed.add(path)
            sys.stdout.write(f"── {path}:\n")
        elif isinstance(event, Delta):
            piece = self.stream.feed(event.text)
            if piece and self.after_tool:  # the answer starts below the timeline lines
                piece = "\n" + piece.lstrip("\n")
                self.after_tool = False
            sys.stdout.write(piece)
            sys.stdout.flush()
        elif isinstance(event, ToolStarted):
            self.stream.next_step()
        elif isinstance(event, ToolFinished):
            self.records.append(event.record)
            self.after_tool = True
            sys.stdout.write(f"\n  {timeline_line(event.record)}")
            sys.stdout.flush()
        elif isinstance(event, StepLimitReached):
            sys.stdout.write(f"\n  (tool step limit of {event.steps} reached)")
        elif isinstance(event, Finished | Cancelled):
            tools = tools_summary(self.records, sum(r.duration_s for r in self.records if not r.reused))
            line = event.metrics.summary_line() + (f" · {tools}" if tools else "")
            stopped = " · stopped" if isinstance(event, Cancelled) else ""
            sys.stdout.write(f"\n── {path}: {line}{stopped}\n")
            self.stream, self.records, self.after_tool = VisibleStream(), [], False
            return 0
        elif isinstance(event, Failed):
            self.console.write(f"\ngemma-chat: {event.message}\n")
            return 1
        return None

    def compare(self, result: CompareResult) -> None:
        sys.stdout.write(f"── compare: {result.summary()}\n")


class JsonReport:
    """``--json``: one document at the end instead of streamed text."""

    def __init__(self, attachments: list[Attachment]) -> None:
        self.doc: dict[str, Any] = {
            "attachments": [
                {
                    "path": str(a.path),
                    "kind": a.kind,
                    "tokens": a.tokens,
                    "detail": a.detail,
                    "sha256": a.sha256,
                }
                for a in attachments
            ],
            "paths": {},
        }
        self.records: dict[str, list[ToolRecord]] = {}
        self.console = sys.stderr

    def progress(self, stage: str) -> None:
        return None

    def error(self, error: GemmaChatError) -> None:
        self.doc["error"] = {"problem": error.problem, "fix": error.fix}

    def event(self, path: str, event: Any) -> int | None:
        if isinstance(event, ToolFinished):
            self.records.setdefault(path, []).append(event.record)
        elif isinstance(event, Finished | Cancelled):
            records = self.records.get(path, [])
            self.doc["paths"][path] = {
                "reply": event.text,
                "status": "finished" if isinstance(event, Finished) else "cancelled",
                "figures": asdict(event.metrics),
                "tools": [r.to_json() for r in records],
                "tool_seconds": round(sum(r.duration_s for r in records if not r.reused), 4),
            }
            return 0
        elif isinstance(event, Failed):
            self.doc["paths"][path] = {"status": "failed", "error": event.message}
            return 1
        return None

    def compare(self, result: CompareResult) -> None:
        self.doc["compare"] = {
            "decode_speedup": result.decode_speedup,
            "e2e_speedup": result.e2e_speedup,
            "parity": result.parity.describe(),
            "identical": result.parity.identical,
        }

    def emit(self) -> None:
        sys.stdout.write(json.dumps(self.doc, indent=2, ensure_ascii=False) + "\n")


def _attachment_json(a: Attachment) -> dict[str, Any]:
    return {"path": str(a.path), "kind": a.kind, "tokens": a.tokens, "detail": a.detail, "sha256": a.sha256}
