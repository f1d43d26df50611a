"""What ``gemma-chat ask`` prints for a tool-calling turn (events as the tool loop yields them;
tests/tools/test_tools_engine.py produces the same events from vLLM)."""

from __future__ import annotations

import io
import json

import pytest

from app.commands.ask_output import JsonReport, TextPrinter
from backend.chat.rendering import dispatch
from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import Finished, Started
from backend.engine.reply_events import ReplyDelta
from backend.gemma4.tool_call import ToolCall
from backend.tools.loop import ToolFinished, ToolStarted
from backend.tools.runner import ToolRecord

CALL = ToolCall("calculator", {"expression": "6 * 7"})
RECORD = ToolRecord(1, "calculator", {"expression": "6 * 7"}, "ok", result=42, duration_s=0.0004)
METRICS = TurnMetrics(prompt_tokens=20, generated_tokens=12, ttft_s=0.05, decode_tokens_per_s=50.0, e2e_s=0.3)
EVENTS = [
    Started("r"),
    ReplyDelta("r", "", "The user wants 6 * 7.", (1,)),
    ReplyDelta("r", "Let me compute.", "", (2,)),
    ReplyDelta("r", "", "", (3,)),  # the call: nothing to read
    ToolStarted(1, 0, CALL),
    ToolFinished(0, RECORD),
    ReplyDelta("r", "\n\nIt is 42.", "", (4,)),
    ReplyDelta("r", "", "", (5,)),
    Finished("r", "Let me compute.\n\nIt is 42.", (1, 2, 3, 4, 5), METRICS, "stop", "The user wants 6 * 7."),
]


async def test_text_output_streams_the_answer_and_a_timeline_line(capsys: pytest.CaptureFixture[str]) -> None:
    renderer = TextPrinter(io.StringIO()).renderer("optimized")
    ended = [await dispatch(renderer, e) for e in EVENTS]
    assert ended[-1] and not any(ended[:-1]) and renderer.exit_code == 0
    out = capsys.readouterr().out
    assert out.startswith("thought: The user wants 6 * 7.\n\nLet me compute.\n  ✓ calculator(")
    assert 'calculator(expression="6 * 7") → 42 · 0 ms' in out
    assert "→ 42 · 0 ms\nIt is 42." in out
    assert out.rstrip().splitlines()[-1].endswith("· tools 0 ms (1 call)")


async def test_json_output_has_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    report = JsonReport([])
    renderer = report.renderer("optimized")
    for event in EVENTS:
        await dispatch(renderer, event)
    report.emit()
    doc = json.loads(capsys.readouterr().out)
    path = doc["paths"]["optimized"]
    assert path["reply"] == "Let me compute.\n\nIt is 42."
    assert path["thought"] == "The user wants 6 * 7."
    assert path["tools"] == [RECORD.to_json()]
    assert path["tools"][0]["result"] == 42 and path["tool_seconds"] == 0.0004
