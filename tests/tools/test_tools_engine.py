"""The tool loop on the real vLLM engine (tiny generated checkpoint).

The model's output is forced to a tool-call text by ``tests.support.forced_output`` (random weights
never call tools on their own); the declarations in the prompt, decoding with special tokens,
parsing, validation, running the tools and the tool-response prompt are the real code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.engine.local.vllm import VllmEngine
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.call_format import format_call
from backend.gemma4.messages import ChatMessage
from backend.tools.builtins import ToolContext
from backend.tools.loop import ToolTurn
from backend.tools.registry import ToolRegistry
from backend.tools.runner import ToolRunner
from backend.tools.sandbox import Sandbox

pytestmark = pytest.mark.engine

SERVER_START_S = 120.0
"""A test MCP server's start bound here (the app's default is 30 s): on a 2-core machine the suite's
other lane keeps both cores busy with engines, and a server once took longer than 30 s to answer."""


def _forcing_builder(engine: VllmEngine, script: list[str], seen: list[EngineRequest], think: bool = False):  # type: ignore[no-untyped-def]
    tokenizer = engine._prompt_renderer().tokenizer

    def build(messages: list[ChatMessage], tools: list[dict[str, object]]) -> EngineRequest:
        prompt = engine.render(messages, tools, think=think)  # type: ignore[arg-type]
        forced = tokenizer(script[len(seen)], add_special_tokens=False)["input_ids"]
        request = EngineRequest(
            f"tools-{len(seen)}",
            prompt.text,
            sampling=SamplingSettings(max_tokens=len(forced) + 8),
            extra_args={"forced_token_ids": forced},
        )
        seen.append(request)
        return request

    return build


async def test_forced_tool_calls_run_and_their_results_reach_the_next_prompt(
    eager_engine: VllmEngine, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("Zebra crossing at 9")
    step1 = (
        "Let me look, 東京 {ok}."
        + format_call("calculator", {"expression": "6 * 7"})
        + format_call("read_file", {"path": "notes.txt"})
        + format_call("read_file", {"path": "../../etc/passwd"})
        + format_call("list_directory", {"path": ".", "recursive": True})
        + "<|tool_response>"
    )
    step2 = "The answer is 42.<turn|>"
    seen: list[EngineRequest] = []
    runner = ToolRunner(ToolRegistry.load(ToolContext(Sandbox.of([tmp_path])), plugins=lambda: []))
    turn = ToolTurn(
        eager_engine,
        runner,
        [ChatMessage("user", "What is six times seven? And what is in my notes?")],
        _forcing_builder(eager_engine, [step1, step2], seen),
    )
    events = [event async for event in turn.run()]
    final = events[-1]
    assert isinstance(final, Finished), final
    assert final.text == "Let me look, 東京 {ok}.\n\nThe answer is 42."
    assert [(r.name, r.status) for r in turn.records] == [
        ("calculator", "ok"),
        ("read_file", "ok"),
        ("read_file", "error"),
        ("list_directory", "invalid_arguments"),
    ]
    assert turn.records[0].result == 42
    assert turn.records[1].result["content"] == "Zebra crossing at 9"
    assert "outside the allowed directories" in turn.records[2].message
    assert "<|tool>declaration:calculator" in seen[0].prompt
    follow_up = seen[1].prompt
    assert follow_up.startswith(seen[0].prompt)
    assert '<|tool_call>call:calculator{expression:<|"|>6 * 7<|"|>}<tool_call|>' in follow_up
    assert "<|tool_response>response:calculator{result:42}<tool_response|>" in follow_up
    assert "Zebra crossing at 9" in follow_up
    assert "recursive" in follow_up and "Extra inputs are not permitted" in follow_up
    assert not follow_up.endswith("<|turn>model\n")  # the model continues its own turn
    tokenizer = eager_engine._prompt_renderer().tokenizer
    forced = [tokenizer(s, add_special_tokens=False)["input_ids"] for s in (step1, step2)]
    assert list(final.token_ids) == forced[0] + forced[1]
    assert final.metrics.generated_tokens == len(final.token_ids)


async def test_a_thinking_turn_whose_call_ends_at_the_stop_token(
    eager_engine: VllmEngine, tmp_path: Path
) -> None:
    """Thinking mode on the real engine: the thought is read apart, a call the model closed with its
    end-of-turn token (a stop token: it never reaches the text) runs, and the prompt after the
    results opens the thought channel, as the published template does."""
    call = format_call("calculator", {"expression": "6 * 7"}).removesuffix("<tool_call|>")
    step1 = "<|channel>thought\nNeed the calculator.<channel|>" + call + "<turn|>"
    step2 = "It is 42, I am sure.<channel|>The answer is 42.<turn|>"
    seen: list[EngineRequest] = []
    runner = ToolRunner(ToolRegistry.load(ToolContext(Sandbox.of([tmp_path])), plugins=lambda: []))
    turn = ToolTurn(
        eager_engine,
        runner,
        [ChatMessage("user", "What is six times seven?")],
        _forcing_builder(eager_engine, [step1, step2], seen, think=True),
    )
    events = [event async for event in turn.run()]
    final = events[-1]
    assert isinstance(final, Finished), final
    assert (final.text, final.thought) == (
        "The answer is 42.",
        "Need the calculator.\n\nIt is 42, I am sure.",
    )
    assert [(r.name, r.status, r.result) for r in turn.records] == [("calculator", "ok", 42)]
    assert "<|think|>" in seen[0].prompt
    assert seen[1].prompt.endswith("<tool_response|><|channel>thought\n")
    assert final.metrics.thought_tokens > 0
    assert final.metrics.thought_tokens < final.metrics.generated_tokens


async def test_a_malformed_forced_call_goes_back_to_the_model(
    eager_engine: VllmEngine, tmp_path: Path
) -> None:
    step1 = '<|tool_call>call:calculator{expression:<|"|>2+2}<tool_call|><|tool_response>'
    seen: list[EngineRequest] = []
    runner = ToolRunner(ToolRegistry.load(ToolContext(Sandbox.of([tmp_path])), plugins=lambda: []))
    turn = ToolTurn(
        eager_engine,
        runner,
        [ChatMessage("user", "2+2?")],
        _forcing_builder(eager_engine, [step1, "4<turn|>"], seen),
    )
    events = [event async for event in turn.run()]
    assert isinstance(events[-1], Finished) and events[-1].text == "4"
    assert turn.records[0].status == "malformed"
    assert "string is not closed" in seen[1].prompt


async def test_a_forced_call_to_an_mcp_tool_runs_on_its_server(
    eager_engine: VllmEngine, tmp_path: Path
) -> None:
    """The real engine declares the server's tool in Gemma 4's format, and its result (from a
    stdio server written with the SDK) reaches the next prompt."""
    import sys

    from backend.config.settings import McpServerSettings
    from backend.tools.mcp.host import McpHost

    server = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
    # the other lane's engines keep both cores busy: the SDK server may take longer than 30 s to answer
    command = [str(server), "stdio"]
    settings = McpServerSettings(command=sys.executable, args=command, timeout_s=SERVER_START_S)
    host = McpHost({"calc": settings}, tmp_path)
    host.start()
    try:
        assert host.wait_settled(SERVER_START_S + 30), host.statuses()[0].describe()
        assert host.statuses()[0].state == "ready", host.statuses()[0].describe()
        step1 = format_call("calc.add", {"a": 40, "b": 2}) + "<|tool_response>"
        seen: list[EngineRequest] = []
        registry = ToolRegistry.load(
            ToolContext(Sandbox.of([tmp_path])), plugins=lambda: [], remote=host.tools
        )
        turn = ToolTurn(
            eager_engine,
            ToolRunner(registry, policy="never"),
            [ChatMessage("user", "What is 40 + 2?")],
            _forcing_builder(eager_engine, [step1, "42.<turn|>"], seen),
        )
        events = [event async for event in turn.run()]
    finally:
        host.close()
    assert isinstance(events[-1], Finished) and events[-1].text == "42."
    assert [(r.name, r.status, r.result) for r in turn.records] == [("calc.add", "ok", "42")]
    assert "<|tool>declaration:calc.add" in seen[0].prompt
    assert 'response:calc.add{result:<|"|>42<|"|>}' in seen[1].prompt


async def test_an_mcp_image_result_goes_to_the_model_in_its_tool_response(
    eager_engine: VllmEngine, tmp_path: Path
) -> None:
    """Through the turn pipeline (as the app runs it): the server's PNG is kept, its placeholder
    sits in the tool response, and vLLM's multimodal processor takes it there (the step after the
    call is a real image prompt: its prompt token count includes the image's soft tokens)."""
    import sys
    from dataclasses import replace

    from backend.chat.pipeline import FixedPrompt, TurnOptions, TurnPipeline
    from backend.config.settings import McpServerSettings
    from backend.engine.protocol import PathEngine
    from backend.tools.mcp.host import McpHost

    assert "image" in eager_engine.info.modalities, "the tiny checkpoint has a vision tower"
    tokenizer = eager_engine._prompt_renderer().tokenizer
    script = [format_call("art.swatch", {"colour": "#123456"}) + "<|tool_response>", "Blue.<turn|>"]
    sent: list[EngineRequest] = []

    class Forcing:  # the real engine, each step's output forced to the script
        def __getattr__(self, name: str) -> object:
            return getattr(eager_engine, name)

        def stream(self, request: EngineRequest):  # type: ignore[no-untyped-def]
            forced = tokenizer(script[len(sent)], add_special_tokens=False)["input_ids"]
            request = replace(
                request,
                sampling=SamplingSettings(max_tokens=len(forced) + 8),
                extra_args={"forced_token_ids": forced},
            )
            sent.append(request)
            return eager_engine.stream(request)

    server = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
    # the other lane's engines keep both cores busy: the SDK server may take longer than 30 s to answer
    command = [str(server), "stdio"]
    settings = McpServerSettings(command=sys.executable, args=command, timeout_s=SERVER_START_S)
    host = McpHost({"art": settings}, tmp_path)
    host.start()
    try:
        assert host.wait_settled(60)
        registry = ToolRegistry.load(
            ToolContext(Sandbox.of([tmp_path])), plugins=lambda: [], remote=host.tools
        )
        pipeline = TurnPipeline(
            FixedPrompt([ChatMessage("user", "Show me #123456.")]),
            TurnOptions(),
            ToolRunner(registry, policy="never"),
        )
        target = PathEngine("eager", Forcing(), eager_engine.info)  # type: ignore[arg-type]
        events = [event async for event in pipeline.run(target)]
    finally:
        host.close()
    final = events[-1]
    assert isinstance(final, Finished) and final.text == "Blue.", final
    (record,) = pipeline._tool_turns["eager"].records
    assert record.status == "ok" and len(record.images) == 1
    second = sent[1]
    assert second.prompt.count("<|image|>") == 1 and "[image 1: image/png 32x16]" in second.prompt
    assert [image.size for image in second.multi_modal_data["image"]] == [(32, 16)]
    text_only = len(tokenizer(second.prompt, add_special_tokens=False)["input_ids"])
    assert final.metrics.prompt_tokens > text_only, "vLLM expanded the placeholder into soft tokens"
