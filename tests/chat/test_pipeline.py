"""The shared turn pipeline (what the app and ``ask`` both run), on the fake engine; the real engine
runs it in tests/app/test_app_entry.py, tests/app/test_first_run.py, tests/app/test_cli.py and the
tool tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.tui.widgets.status_bar import StatusFigures
from backend.chat.compare import SAME_PATHS, CompareResult
from backend.chat.pipeline import FixedPrompt, HistoryTrimmed, PromptSized, TurnOptions, TurnPipeline
from backend.chat.verdict import Verdict, first_path
from backend.engine.protocol import Cancelled, EngineInfo, Failed, Finished, PathEngine, SamplingSettings
from backend.errors import PromptTooLong
from backend.gemma4.messages import ChatMessage, RenderedPrompt
from backend.media.attachment import AttachmentError
from backend.tools.builtins import ToolContext
from backend.tools.registry import ToolRegistry
from backend.tools.runner import ToolRunner
from backend.tools.sandbox import Sandbox
from tests.support.fake_engine import FakeEngine


async def _target(name: str, **fake: object) -> PathEngine:
    engine = FakeEngine(name, **fake)  # type: ignore[arg-type]
    return PathEngine(name, engine, await engine.start())


def _prompt(*texts: str) -> FixedPrompt:
    return FixedPrompt([ChatMessage("user", t) for t in texts])


async def _no_pause() -> None:
    """The pause between a compare's paths, which a fake engine does not need."""


async def test_tools_off_is_one_request(tmp_path: Path) -> None:
    target = await _target("optimized")
    events = [e async for e in TurnPipeline(_prompt("hi"), TurnOptions()).run(target)]
    assert isinstance(events[-1], Finished) and len(target.engine.requests) == 1  # type: ignore[attr-defined]
    assert "<tool:" not in target.engine.requests[0].prompt  # type: ignore[attr-defined]
    assert any(isinstance(e, PromptSized) and e.window == 4096 for e in events)


async def test_tools_on_declares_them_and_runs_the_loop(tmp_path: Path) -> None:
    target = await _target("optimized")
    runner = ToolRunner(ToolRegistry.load(ToolContext(Sandbox.of([str(tmp_path)]), tmp_path / "h.db")))
    events = [e async for e in TurnPipeline(_prompt("hi"), TurnOptions(), runner).run(target)]
    assert isinstance(events[-1], Finished)
    assert "<tool:calculator>" in target.engine.requests[0].prompt  # type: ignore[attr-defined]


async def test_a_prompt_over_the_window_is_refused_before_any_engine_work() -> None:
    target = await _target("optimized", max_model_len=300)
    pipeline = TurnPipeline(_prompt("word " * 400), TurnOptions(too_long_fix="do less"))
    with pytest.raises(PromptTooLong, match="optimized path's context window") as raised:
        [e async for e in pipeline.run(target)]
    assert raised.value.fix == "do less" and not target.engine.requests  # type: ignore[attr-defined]


class Shrinking(FixedPrompt):
    def drop_oldest(self) -> str | None:
        if len(self.prompt) <= 1:
            return None
        return self.prompt.pop(0).role


async def test_trimming_drops_the_oldest_turns_and_says_so() -> None:
    target = await _target("optimized", max_model_len=300)
    source = Shrinking([ChatMessage("user", "old " * 300), ChatMessage("user", "new")])
    options = TurnOptions(sampling=SamplingSettings(max_tokens=64), trim_history=True)
    events = [e async for e in TurnPipeline(source, options).run(target)]
    assert HistoryTrimmed("optimized", "user") in events and isinstance(events[-1], Finished)
    assert "old" not in target.engine.requests[0].prompt  # type: ignore[attr-defined]


async def test_attachments_the_model_cannot_take_are_refused_on_either_path(tmp_path: Path) -> None:
    from backend.media.load import load_attachment
    from tests.support.media_files import audio_file

    audio = load_attachment(audio_file(tmp_path / "a.wav", seconds=1.0))
    baseline = await _target("baseline", modalities=frozenset({"text"}))
    optimized = await _target("optimized")
    pipeline = TurnPipeline(
        FixedPrompt([ChatMessage("user", "hear", media=("audio",))], [audio]), TurnOptions()
    )
    with pytest.raises(AttachmentError, match="baseline path's model cannot take audio"):
        [e async for e in pipeline.compare(baseline, optimized, "baseline", _no_pause)]
    assert not optimized.engine.requests, "refused before either path ran"  # type: ignore[attr-defined]


async def test_compare_says_what_differed_and_when_nothing_did() -> None:
    baseline, optimized = await _target("baseline"), await _target("optimized")
    items = [
        i
        async for i in TurnPipeline(_prompt("hi"), TurnOptions()).compare(
            baseline, optimized, "baseline", _no_pause
        )
    ]
    result = items[-1]
    assert isinstance(result, CompareResult) and result.parity.identical
    assert result.decode_speedup == 2.5 and "path=optimized" in result.differences_line()

    same = EngineInfo("m", 4096, frozenset({"text"}), {"dtype": "auto"}, {"VLLM_CPU_KVCACHE_SPACE": "1"})
    twins = [PathEngine(p, FakeEngine(p), same) for p in ("baseline", "optimized")]
    items = [
        i async for i in TurnPipeline(_prompt("hi"), TurnOptions()).compare(*twins, "baseline", _no_pause)
    ]
    result = items[-1]
    assert isinstance(result, CompareResult) and result.same_paths
    assert result.decode_speedup is None and Verdict(result).summary().startswith(SAME_PATHS)


async def test_compare_pauses_between_the_paths() -> None:
    """The optimized path starts only after the caller's pause (the baseline's engine going quiet)."""
    baseline, optimized = await _target("baseline"), await _target("optimized")
    pauses: list[tuple[int, int]] = []

    async def pause() -> None:
        pauses.append((len(baseline.engine.requests), len(optimized.engine.requests)))  # type: ignore[attr-defined]

    pipeline = TurnPipeline(_prompt("hi"), TurnOptions())
    items = [i async for i in pipeline.compare(baseline, optimized, "baseline", pause)]
    assert isinstance(items[-1], CompareResult)
    assert pauses == [(1, 0)], "one pause, after the baseline's request, before the optimized one"


async def test_compare_runs_the_first_path_named_first_and_pauses_before_the_other() -> None:
    baseline, optimized = await _target("baseline"), await _target("optimized")
    pauses: list[tuple[int, int]] = []

    async def pause() -> None:
        pauses.append((len(baseline.engine.requests), len(optimized.engine.requests)))  # type: ignore[attr-defined]

    pipeline = TurnPipeline(_prompt("hi"), TurnOptions())
    items = [i async for i in pipeline.compare(baseline, optimized, "optimized", pause)]
    started = [i.path for i in items if hasattr(i, "event") and type(i.event).__name__ == "Started"]
    assert started == ["optimized", "baseline"] and pauses == [(0, 1)]
    result = items[-1]
    assert isinstance(result, CompareResult) and result.decode_speedup == 2.5, "still optimized / baseline"
    with pytest.raises(ValueError, match="first must be"):
        [
            i
            async for i in TurnPipeline(_prompt("hi"), TurnOptions()).compare(
                baseline, optimized, "fast", _no_pause
            )
        ]


def test_the_first_path_alternates_unless_one_is_on_the_device() -> None:
    assert [first_path(n) for n in range(3)] == ["baseline", "optimized", "baseline"]
    assert first_path(0, "optimized") == "optimized" and first_path(1, "baseline") == "baseline"
    assert first_path(1, None) == "optimized"


async def test_stop_before_a_path_starts_cancels_it_without_a_request() -> None:
    target = await _target("optimized")
    pipeline = TurnPipeline(_prompt("hi"), TurnOptions())
    await pipeline.stop()
    events = [e async for e in pipeline.run(target)]
    assert isinstance(events[-1], Cancelled) and not target.engine.requests  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [80, 100, 120, 140, 200])
def test_the_status_line_is_shortened_to_fit_never_cut(width: int) -> None:
    figures = StatusFigures(
        "demo (10M Gemma 4)",
        "optimized",
        "starting 12s",
        "loading the model and warming up the engine",
        1046,
        8192,
        compare_next=True,
    )
    line = figures.line(width)
    plain = line.replace("[b]", "").replace("[/b]", "")
    assert len(plain) <= width and plain.endswith(("compare next", "compare"))
    assert "1046/8192" in plain and "starting 12s" in plain and "optimized" in plain
    if width >= 160:
        assert "warming up the engine" in plain and "demo (10M Gemma 4)" in plain


async def test_compare_stops_before_generating_when_a_server_tokenizes_differently() -> None:
    """The real server's ``/tokenize`` is in tests/engine/remote/test_remote_engine.py; here a server engine
    whose tokens differ from local tokenization gets one Failed, and neither path generates."""

    class Served(FakeEngine):
        url = "http://gpu:8000"

        def prompt_token_ids(self, prompt: str) -> list[int]:
            return [1, 2, 3]

        async def server_prompt_token_ids(self, prompt: str) -> list[int]:
            return [1, 2, 4, 5]

    baseline = await _target("baseline")
    served = Served("optimized")
    optimized = PathEngine("optimized", served, await served.start())
    items = [
        i
        async for i in TurnPipeline(_prompt("hi"), TurnOptions()).compare(
            baseline, optimized, "baseline", _no_pause
        )
    ]
    (failed,) = [i.event for i in items if hasattr(i, "event") and isinstance(i.event, Failed)]
    assert failed.message.startswith("The server at http://gpu:8000 tokenizes the prompt differently")
    assert "(4 vs 3 tokens, first difference at token 2)" in failed.message
    assert not baseline.engine.requests and not served.requests  # type: ignore[attr-defined]


class CountingRenders(FakeEngine):
    """A fake engine that counts how often a prompt is rendered on it."""

    renders = 0

    def render(self, *args: Any, **kwargs: Any) -> RenderedPrompt:
        self.renders += 1
        return super().render(*args, **kwargs)


async def _counted(name: str) -> PathEngine:
    engine = CountingRenders(name)
    return PathEngine(name, engine, await engine.start())


async def test_a_compare_renders_each_paths_prompt_once_per_step(tmp_path: Path) -> None:
    baseline, optimized = await _counted("baseline"), await _counted("optimized")
    items = [
        i
        async for i in TurnPipeline(_prompt("hi"), TurnOptions()).compare(
            baseline, optimized, "baseline", _no_pause
        )
    ]
    assert isinstance(items[-1], CompareResult)
    assert [t.engine.renders for t in (baseline, optimized)] == [1, 1]  # type: ignore[attr-defined]
    sized = [(i.path, i.event.path) for i in items if isinstance(getattr(i, "event", None), PromptSized)]
    assert sized == [("baseline", "baseline"), ("optimized", "optimized")], "once each, on its own pane"
    runner = ToolRunner(ToolRegistry.load(ToolContext(Sandbox.of([str(tmp_path)]), tmp_path / "h.db")))
    target = await _counted("optimized")
    events = [e async for e in TurnPipeline(_prompt("hi"), TurnOptions(), runner).run(target)]
    assert isinstance(events[-1], Finished)
    assert target.engine.renders == len(target.engine.requests) == 1  # type: ignore[attr-defined]


async def test_history_dropped_for_one_path_is_dropped_for_both() -> None:
    baseline = await _target("baseline", max_model_len=2000)
    optimized = await _target("optimized", max_model_len=300)
    source = Shrinking([ChatMessage("user", "old " * 300), ChatMessage("user", "new")])
    options = TurnOptions(sampling=SamplingSettings(max_tokens=64), trim_history=True)
    items = [
        i async for i in TurnPipeline(source, options).compare(baseline, optimized, "baseline", _no_pause)
    ]
    assert isinstance(items[-1], CompareResult)
    assert HistoryTrimmed("optimized", "user") in [getattr(i, "event", None) for i in items]
    assert all("old" not in t.engine.requests[0].prompt for t in (baseline, optimized))  # type: ignore[attr-defined]
