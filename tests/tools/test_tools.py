"""Tools: schemas from signatures, the calculator, the sandbox, the registry, every bad-call case,
and the loop (driven by the fake engine here; tests/tools/test_tools_engine.py runs it on vLLM)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Literal

import pytest

from backend.chat.store import ChatStore
from backend.engine.protocol import Cancelled, EngineRequest, Finished, SamplingSettings
from backend.gemma4.call_format import format_call
from backend.gemma4.messages import ChatMessage
from backend.gemma4.tool_call import ToolCall
from backend.tools.builtins import ToolContext, builtin_tools
from backend.tools.calculator import CalculationError, evaluate
from backend.tools.loop import StepLimitReached, ToolFinished, ToolStarted, ToolTurn
from backend.tools.registry import ToolRegistry
from backend.tools.runner import ToolRunner
from backend.tools.sandbox import Sandbox, SandboxError
from backend.tools.spec import Tool, ToolArgumentsError, tool
from backend.tools.timeline import timeline_line
from tests.support.fake_engine import FakeEngine


def _builtins(root: Path, history: Path | None = None) -> dict[str, Tool]:
    return {t.name: t for t in builtin_tools(ToolContext(Sandbox.of([root]), history, max_read_bytes=64))}


# --- schemas -------------------------------------------------------------------------------------


def test_schema_comes_from_the_signature_and_the_docstring() -> None:
    def lookup(city: str, days: int = 1, units: Literal["metric", "imperial"] = "metric") -> str:
        """Weather for a city.

        Longer text that the model does not need."""
        return city

    spec = Tool.from_function(lookup)
    declaration = spec.declaration()["function"]
    assert declaration["name"] == "lookup"
    assert declaration["description"] == "Weather for a city."
    params = declaration["parameters"]
    assert params["required"] == ["city"]
    assert params["properties"]["days"] == {"type": "integer", "description": "Default: 1"}
    assert params["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert spec.validate({"city": "Oslo", "days": "3"}) == {"city": "Oslo", "days": 3, "units": "metric"}
    with pytest.raises(ToolArgumentsError, match="days"):
        spec.validate({"city": "Oslo", "days": "many"})
    with pytest.raises(ToolArgumentsError, match="Extra inputs"):
        spec.validate({"city": "Oslo", "color": "red"})


def test_a_property_called_title_survives_title_stripping() -> None:
    def note(title: str, body: str) -> str:
        """Write a note."""
        return title

    assert set(Tool.from_function(note).parameters()["properties"]) == {"title", "body"}


def test_a_tool_needs_a_docstring_and_types() -> None:
    def bare(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="docstring"):
        Tool.from_function(bare)


# --- calculator ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 3 * 4", 14),
        ("(17 * 23) / 4", 97.75),
        ("2 ** 10", 1024),
        ("sqrt(16) + abs(-2)", 6.0),
        ("7 // 2", 3),
    ],
)
def test_calculator_computes(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "open('x')", "1/0", "9 ** 99999", "x + 1", "2 +", "(10**9999)**9999"],
)
def test_calculator_refuses_anything_else(expression: str) -> None:
    with pytest.raises(CalculationError):
        evaluate(expression)


# --- file tools and their sandbox ----------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "allowed"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("hello sandbox")
    (root / "big.txt").write_text("x" * 500)
    (root / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "secret.txt").write_text("do not read")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    (root / "escape_dir").symlink_to(tmp_path)
    return root


def test_read_file_inside_the_allowed_directory(tree: Path) -> None:
    tools = _builtins(tree)
    assert tools["read_file"].function("notes.txt")["content"] == "hello sandbox"
    assert tools["read_file"].function(str(tree / "sub" / "deep.txt"))["content"] == "deep"
    big = tools["read_file"].function("big.txt")
    assert big["truncated"] is True and len(big["content"]) == 64


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "escape", "escape_dir/secret.txt"])
def test_read_file_cannot_leave_the_sandbox(tree: Path, path: str) -> None:
    with pytest.raises(SandboxError, match="outside the allowed directories"):
        _builtins(tree)["read_file"].function(path)


def test_absolute_paths_elsewhere_are_refused(tree: Path) -> None:
    with pytest.raises(SandboxError):
        _builtins(tree)["read_file"].function("/etc/passwd")
    with pytest.raises(SandboxError):
        _builtins(tree)["list_directory"].function(str(tree.parent))


def test_no_allowed_directory_says_how_to_allow_one() -> None:
    with pytest.raises(SandboxError, match="--allow-dir"):
        Sandbox.of([]).resolve("x")


def test_list_directory(tree: Path) -> None:
    listing = _builtins(tree)["list_directory"].function(".")
    kinds = {e["name"]: e["kind"] for e in listing["entries"]}
    assert kinds == {
        "big.txt": "file",
        "escape": "link",
        "escape_dir": "link",
        "notes.txt": "file",
        "sub": "dir",
    }


def test_current_time_and_search_history(tmp_path: Path) -> None:
    history = tmp_path / "history.db"
    store = ChatStore(history)
    chat = store.new_chat("Trip planning")
    store.add_message(chat, None, "user", "Remember the ferry leaves at 7:40", None, None, ())
    store.close()
    tools = _builtins(tmp_path, history)
    found = tools["search_history"].function("ferry")
    assert found == [{"chat": "Trip planning", "role": "user", "text": "Remember the ferry leaves at 7:40"}]
    assert tools["current_time"].function("Asia/Tokyo")["timezone"] == "Asia/Tokyo"
    with pytest.raises(ValueError, match="unknown time zone"):
        tools["current_time"].function("Mars/Olympus")


# --- registry ------------------------------------------------------------------------------------


class _Entry:
    def __init__(self, name: str, obj: object) -> None:
        self.name, self.value, self._obj = name, f"plugin:{name}", obj

    def load(self) -> object:
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


def test_plugins_load_and_a_broken_one_is_skipped_with_a_warning(tmp_path: Path) -> None:
    @tool(side_effects=True)
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return "sent"

    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    entries = [
        _Entry("mail", send_email),
        _Entry("broken", ImportError("no module named x")),
        _Entry("s", [shout]),
    ]
    registry = ToolRegistry.load(ToolContext(Sandbox.of([tmp_path])), plugins=lambda: entries)  # type: ignore[arg-type,return-value]
    assert {
        "calculator",
        "current_time",
        "read_file",
        "list_directory",
        "search_history",
        "send_email",
        "shout",
    } == set(registry.tools)
    assert registry.tools["send_email"].side_effects
    assert len(registry.warnings) == 1 and "broken" in registry.warnings[0]


# --- runner: every bad-call case -----------------------------------------------------------------


def _runner(tmp_path: Path, *extra: Tool, policy: str = "side-effects", answer: str = "once") -> ToolRunner:
    registry = ToolRegistry.load(ToolContext(Sandbox.of([tmp_path])), plugins=lambda: [])
    for t in extra:
        registry.add(t)

    async def approver(call: ToolCall, spec: Tool) -> str:
        approver.asked.append(call.name)  # type: ignore[attr-defined]
        return answer

    approver.asked = []  # type: ignore[attr-defined]
    return ToolRunner(registry, policy=policy, approver=approver)  # type: ignore[arg-type]


def _slow() -> Tool:
    def slow(seconds: float) -> str:
        """Sleep."""
        time.sleep(seconds)
        return "done"

    return Tool.from_function(slow, timeout_s=0.2)


def _boom() -> Tool:
    def boom() -> str:
        """Fail."""
        raise RuntimeError("the disk is on fire")

    return Tool.from_function(boom)


@pytest.mark.parametrize(
    ("call", "status", "message"),
    [
        (ToolCall("nope", {}), "unknown_tool", "no tool named 'nope'"),
        (ToolCall("calculator", {"expr": "1"}), "invalid_arguments", "invalid arguments for calculator"),
        (ToolCall("calculator", {}, "<|tool_call>call:calculator{", "cut off"), "malformed", "cut off"),
        (ToolCall("boom", {}), "error", "RuntimeError: the disk is on fire"),
        (ToolCall("slow", {"seconds": 2}), "timeout", "did not finish within 0.2 s"),
        (ToolCall("calculator", {"expression": "1/0"}), "error", "division by zero"),
    ],
)
async def test_bad_calls_become_records_the_model_can_read(
    tmp_path: Path, call: ToolCall, status: str, message: str
) -> None:
    record = await _runner(tmp_path, _slow(), _boom()).run(call, step=1)
    assert record.status == status
    assert message in record.message
    assert record.response() == {"error": record.message}


async def test_approval_once_always_and_deny(tmp_path: Path) -> None:
    @tool(side_effects=True)
    def delete(name: str) -> str:
        """Delete something."""
        return f"deleted {name}"

    runner = _runner(tmp_path, delete, answer="always")
    assert (await runner.run(ToolCall("delete", {"name": "a"}), 1)).result == "deleted a"
    assert (await runner.run(ToolCall("delete", {"name": "b"}), 1)).ok
    assert runner.approver.asked == ["delete"]  # type: ignore[union-attr]
    assert (await runner.run(ToolCall("calculator", {"expression": "1+1"}), 1)).result == 2  # no side effects
    denied = await _runner(tmp_path, delete, answer="deny").run(ToolCall("delete", {"name": "a"}), 1)
    assert denied.status == "denied" and "did not allow" in denied.response()["error"]
    every = _runner(tmp_path, policy="every-call", answer="once")
    await every.run(ToolCall("calculator", {"expression": "1"}), 1)
    await every.run(ToolCall("calculator", {"expression": "2"}), 1)
    assert every.approver.asked == ["calculator", "calculator"]  # type: ignore[union-attr]


async def test_a_result_json_cannot_write_becomes_text(tmp_path: Path) -> None:
    record = await _runner(tmp_path).run(ToolCall("calculator", {"expression": "10 ** 5000"}), 1)
    assert record.ok and record.result == "<an integer of 16610 bits>"
    assert "16610 bits" in timeline_line(record)


async def test_a_hung_tool_does_not_outlive_its_timeout_in_a_joined_thread(tmp_path: Path) -> None:
    import threading

    record = await _runner(tmp_path, _slow()).run(ToolCall("slow", {"seconds": 1.0}), 1)
    assert record.status == "timeout"
    hung = [t for t in threading.enumerate() if t.name == "gemma-chat-tool"]
    assert hung and all(t.daemon for t in hung), "a daemon thread: exit does not wait for it"


async def test_a_cache_runs_each_distinct_call_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def counter(n: int) -> int:
        """Count."""
        calls.append(n)
        return len(calls)

    runner = _runner(tmp_path, Tool.from_function(counter))
    cache: dict[str, object] = {}
    first = await runner.run(ToolCall("counter", {"n": 1}), 1, cache)  # type: ignore[arg-type]
    again = await runner.run(ToolCall("counter", {"n": "1"}), 1, cache)  # type: ignore[arg-type]
    other = await runner.run(ToolCall("counter", {"n": 2}), 1, cache)  # type: ignore[arg-type]
    assert (first.result, again.result, again.reused, other.result) == (1, 1, True, 2)
    assert calls == [1, 2]


# --- the loop (fake engine) ----------------------------------------------------------------------


def _builder(engine: FakeEngine):  # type: ignore[no-untyped-def]
    def build(messages: list[ChatMessage], tools: list[dict[str, object]]) -> EngineRequest:
        prompt = engine.render(messages, tools)  # type: ignore[arg-type]
        return EngineRequest(
            f"r{len(engine.requests)}", prompt.text, sampling=SamplingSettings(max_tokens=200)
        )

    return build


async def _run(turn: ToolTurn) -> list[object]:
    return [event async for event in turn.run()]


async def test_loop_runs_several_calls_then_answers(tmp_path: Path) -> None:
    engine = FakeEngine(
        "eager",
        script=[
            "Checking. "
            + format_call("calculator", {"expression": "6*7"})
            + format_call("nope", {})
            + "<|tool_response>",
            "It is 42.<turn|>",
        ],
    )
    turn = ToolTurn(engine, _runner(tmp_path), [ChatMessage("user", "6*7?")], _builder(engine))
    events = await _run(turn)
    assert [type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolFinished)] == [
        "ToolStarted",
        "ToolFinished",
        "ToolStarted",
        "ToolFinished",
    ]
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.text == "Checking.\n\nIt is 42."
    assert [r.status for r in turn.records] == ["ok", "unknown_tool"]
    second_prompt = engine.requests[1].prompt
    assert "<tool:calculator>" in second_prompt and "{'result': 42}" in second_prompt
    assert [m.role for m in turn.transcript] == ["assistant", "tool", "tool"]
    assert turn.final_text == "It is 42."


async def test_loop_stops_at_the_step_limit(tmp_path: Path) -> None:
    call = format_call("calculator", {"expression": "1"})
    engine = FakeEngine("eager", script=[call] * 5)
    turn = ToolTurn(engine, _runner(tmp_path), [ChatMessage("user", "loop")], _builder(engine), max_steps=3)
    events = await _run(turn)
    assert any(isinstance(e, StepLimitReached) for e in events)
    assert isinstance(events[-1], Finished) and "step limit" in events[-1].text
    assert len(engine.requests) == 3
    assert [r.status for r in turn.records] == ["ok", "ok", "skipped"], (
        "the model could not read a 4th result"
    )


async def test_cancel_while_a_tool_runs_stops_the_loop(tmp_path: Path) -> None:
    engine = FakeEngine("eager", script=[format_call("slow", {"seconds": 0.15}), "never reached"])
    turn = ToolTurn(engine, _runner(tmp_path, _slow()), [ChatMessage("user", "x")], _builder(engine))

    async def stop_soon() -> None:
        await asyncio.sleep(0.05)
        turn.cancel()

    events, _ = await asyncio.gather(_run(turn), stop_soon())
    assert isinstance(events[-1], Cancelled)
    assert len(engine.requests) == 1


def test_symlinked_root_itself_is_fine(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a")
    link = tmp_path / "link"
    os.symlink(real, link)
    assert Sandbox.of([link]).resolve("a.txt") == (real / "a.txt")
