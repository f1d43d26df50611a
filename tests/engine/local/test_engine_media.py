"""Images, audio and video through the real vLLM engine: a reply streams, and the prompt's
token count equals the text plus the attachment costs computed before sending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.engine.local.vllm import VllmEngine
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.messages import ChatMessage, PromptRenderer
from backend.media.attachment import media_payloads
from backend.media.load import load_attachment
from tests.app.test_cli import _gemma_chat
from tests.support.media_files import audio_file, image_file, video_file

pytestmark = pytest.mark.engine


async def _prompt_tokens(engine: VllmEngine, paths: list[Path]) -> tuple[int, int, int]:
    attachments = [load_attachment(p) for p in paths]
    renderer = PromptRenderer.for_model(str(engine.source.path))
    kinds = tuple(a.kind for a in attachments)
    rendered = renderer.render([ChatMessage("user", "What is in these?", media=kinds)])  # type: ignore[arg-type]
    request = EngineRequest(
        request_id=f"media-{'-'.join(kinds)}",
        prompt=rendered.text,
        multi_modal_data=media_payloads(attachments),
        sampling=SamplingSettings(max_tokens=8, ignore_eos=True),
    )
    final = [e async for e in engine.stream(request)][-1]
    assert isinstance(final, Finished), final
    assert final.metrics.generated_tokens == 8
    expected = rendered.token_count - len(attachments) + sum(a.tokens for a in attachments)
    return final.metrics.prompt_tokens, expected, len(attachments)


async def test_image_and_audio_costs_match_the_engine(eager_engine: VllmEngine, tmp_path: Path) -> None:
    paths = [image_file(tmp_path / "a.png", 200, 150), audio_file(tmp_path / "a.wav", seconds=3.0)]
    actual, expected, _ = await _prompt_tokens(eager_engine, paths)
    assert actual == expected


async def test_video_streams_and_costs_at_least_its_frames(eager_engine: VllmEngine, tmp_path: Path) -> None:
    actual, expected, _ = await _prompt_tokens(
        eager_engine, [video_file(tmp_path / "v.mp4", seconds=2.0, fps=4)]
    )
    # each frame also gets its "mm:ss" stamp as text tokens
    assert expected <= actual <= expected + 8 * 8


def test_ask_with_attachments_as_json(tmp_path: Path) -> None:
    image = image_file(tmp_path / "photo.png", 96, 96)
    audio = audio_file(tmp_path / "voice.wav", seconds=1.0)
    result = _gemma_chat(
        "ask",
        "--demo",
        "--path",
        "eager",
        "--dtype",
        "float32",
        "--max-tokens",
        "8",
        "--json",
        "--no-tools",
        "-a",
        str(image),
        "-a",
        str(audio),
        "Describe both.",
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [a["kind"] for a in doc["attachments"]] == ["image", "audio"]
    figures = doc["paths"]["eager"]["figures"]
    assert doc["paths"]["eager"]["tools"] == [] and doc["paths"]["eager"]["tool_seconds"] == 0
    assert 1 <= figures["generated_tokens"] <= 8  # the trained demo model may end its turn early
    assert figures["prompt_tokens"] > sum(a["tokens"] for a in doc["attachments"])
