"""How a turn's tool calls read in a timeline (the CLI prints these; the TUI titles its blocks)."""

from __future__ import annotations

import json
from typing import Any

from backend.tools.runner import ToolRecord

STATUS_MARKS = {
    "ok": "✓",
    "error": "✗",
    "denied": "⊘",
    "unknown_tool": "?",
    "invalid_arguments": "✗",
    "malformed": "✗",
    "timeout": "⏱",
    "cancelled": "■",
    "skipped": "–",
}


def call_signature(name: str, arguments: dict[str, Any], width: int = 80) -> str:
    """``calculator(expression="6 * 7")``, shortened to ``width`` characters."""
    inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    text = f"{name}({inner})"
    return text if len(text) <= width else text[: width - 2] + "…)"


def result_preview(record: ToolRecord, width: int = 80) -> str:
    text = json.dumps(record.result, ensure_ascii=False) if record.ok else record.message
    text = " ".join(text.split())
    if record.full_chars:  # the cut is said first, so a narrow line still shows it
        text = f"[the model read {len(str(record.result)):,} of {record.full_chars:,} characters] {text}"
    return text if len(text) <= width else text[: width - 1] + "…"


def duration_text(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def timeline_line(record: ToolRecord) -> str:
    """One line: mark, call, result or error, duration, status."""
    mark = STATUS_MARKS.get(record.status, "•")
    took = "reused" if record.reused else duration_text(record.duration_s)
    status = "" if record.ok else f" · {record.status.replace('_', ' ')}"
    return (
        f"{mark} {call_signature(record.name, record.arguments)} → {result_preview(record)} · {took}{status}"
    )


def tools_summary(records: list[ToolRecord], seconds: float) -> str:
    calls = len(records)
    return f"tools {duration_text(seconds)} ({calls} call{'s' if calls != 1 else ''})" if calls else ""
