"""Hardening round 3 (issue 46, item 3): a reply with hundreds of tool calls. Past the 16 one reply
may make, the calls are one record and one response to the model, so the next prompt stays small;
a streaming reply is not read again past its first call. (Ctrl+Q while such a reply is stopped is
in tests/hostile/test_hostile_lifetime.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.engine.protocol import Finished
from backend.gemma4.call_format import format_call
from backend.gemma4.messages import ChatMessage
from backend.tools.loop import ToolTurn
from tests.support.fake_engine import FakeEngine
from tests.tools.test_tools import _builder, _run, _runner


async def test_a_reply_with_a_thousand_calls_costs_the_next_prompt_one_summary(tmp_path: Path) -> None:
    """Hardening round 3: 16 calls run; the other 984 are one record and one response naming how
    many were not run and of which tools, so the next prompt stays the size of a 17-call step."""
    from backend.tools.loop import MAX_CALLS_PER_STEP

    calls = [format_call("calculator", {"expression": f"{n}+1"}) for n in range(600)]
    calls += [format_call("nope", {"n": n}) for n in range(400)]
    engine = FakeEngine("eager", script=["".join(calls) + "<|tool_response>", "Done.<turn|>"])
    turn = ToolTurn(engine, _runner(tmp_path), [ChatMessage("user", "many")], _builder(engine))
    events = await _run(turn)
    assert isinstance(events[-1], Finished) and events[-1].text == "Done."
    assert len(turn.records) == MAX_CALLS_PER_STEP + 1
    assert [r.status for r in turn.records[:MAX_CALLS_PER_STEP]] == ["ok"] * MAX_CALLS_PER_STEP
    summary = turn.records[-1]
    assert summary.status == "skipped"
    assert "984 more calls (calculator ×584, nope ×400)" in summary.message
    second_prompt = engine.requests[1].prompt
    assert second_prompt.count("calculator") < 40 and "984 more calls" in second_prompt
    assert len(second_prompt) < 20 * len(engine.requests[0].prompt) + 5000


def test_a_streaming_reply_of_a_thousand_calls_is_read_once_past_its_first_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hardening round 3: the reply was read again on every piece (1,000 calls: minutes of CPU);
    past the first call nothing is read until the step's end, and the answer before it still shows."""
    from backend.gemma4 import reply as reply_module
    from backend.gemma4.call_format import format_call

    text = "Let me check. " + "".join(format_call("calc", {"x": n}) for n in range(1000))
    reads: list[str] = []
    real = reply_module.read_reply
    monkeypatch.setattr(reply_module, "read_reply", lambda t, p: reads.append(t) or real(t, p))
    stream = reply_module.ReplyStream()
    shown = "".join(stream.feed(text[i : i + 4], 1).answer for i in range(0, len(text), 4))
    assert shown.strip() == "Let me check."
    assert len(reads) <= 10, "the pieces before the first call (and its marker), not 16,000"
