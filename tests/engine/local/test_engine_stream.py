"""The real vLLM engine (CPU build) on the generated tiny checkpoint: streaming, media, parity."""

from __future__ import annotations

import pytest

from backend.checkpoints import GeneratedCheckpoint
from backend.engine.local.vllm import VllmEngine
from backend.engine.protocol import (
    Delta,
    EngineRequest,
    Finished,
    MetricsUpdate,
    SamplingSettings,
    Started,
    TurnEvent,
)
from backend.gemma4.messages import ChatMessage, PromptRenderer

pytestmark = pytest.mark.engine


async def _collect(engine: VllmEngine, request: EngineRequest) -> list[TurnEvent]:
    return [event async for event in engine.stream(request)]


def _request(engine: VllmEngine, rid: str, text: str, max_tokens: int = 24, **media: object) -> EngineRequest:
    kinds = tuple(kind for kind in ("image", "audio", "video") if kind in media)
    prompt = PromptRenderer.for_model(str(engine.source.path)).render(
        [ChatMessage("user", text, media=kinds)]
    )
    return EngineRequest(
        request_id=rid,
        prompt=prompt.text,
        multi_modal_data={kind: value for kind, value in media.items()},
        sampling=SamplingSettings(max_tokens=max_tokens, ignore_eos=True),
    )


async def test_text_reply_streams_with_engine_metrics(eager_engine: VllmEngine) -> None:
    events = await _collect(eager_engine, _request(eager_engine, "text-1", "Hello, how are you?"))
    assert isinstance(events[0], Started)
    deltas = [e for e in events if isinstance(e, Delta)]
    assert len(deltas) > 1, "the reply must arrive in several pieces"
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.token_ids == tuple(t for d in deltas for t in d.token_ids)
    assert final.text == "".join(d.text for d in deltas)
    metrics = final.metrics
    assert metrics.generated_tokens == len(final.token_ids) == 24
    assert metrics.ttft_s is not None and metrics.e2e_s is not None and 0 < metrics.ttft_s < metrics.e2e_s
    assert metrics.decode_tokens_per_s and metrics.decode_tokens_per_s > 0
    assert metrics.prefill_tokens_per_s and metrics.prefill_tokens_per_s > 0
    assert any(isinstance(e, MetricsUpdate) for e in events)
    assert (
        metrics.prompt_tokens
        == PromptRenderer.for_model(str(eager_engine.source.path))
        .render([ChatMessage("user", "Hello, how are you?")])
        .token_count
    ), "vLLM must see exactly the rendered prompt (one <bos>, no extra special tokens)"


async def test_image_reply_streams(eager_engine: VllmEngine) -> None:
    import numpy as np
    from PIL import Image

    image = Image.fromarray((np.random.default_rng(0).random((96, 144, 3)) * 255).astype("uint8"))
    events = await _collect(eager_engine, _request(eager_engine, "image-1", "Describe it.", image=image))
    final = events[-1]
    assert isinstance(final, Finished), final
    assert final.metrics.generated_tokens == 24
    text_only = PromptRenderer.for_model(str(eager_engine.source.path)).render(
        [ChatMessage("user", "Describe it.")]
    )
    # the <|image|> placeholder became <|image> + soft tokens + <image|>: many more prompt tokens
    assert final.metrics.prompt_tokens > text_only.token_count + 2


@pytest.mark.parametrize("text", ["The capital of France is", "def fibonacci(n):"])
async def test_greedy_tokens_equal_transformers_generate(
    eager_engine: VllmEngine, tiny: GeneratedCheckpoint, text: str
) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny.model)
    model = AutoModelForImageTextToText.from_pretrained(tiny.model, dtype=torch.float32).eval()
    request = _request(eager_engine, f"parity-{len(text)}", text, max_tokens=32)
    events = await _collect(eager_engine, request)
    final = events[-1]
    assert isinstance(final, Finished)
    inputs = tokenizer(request.prompt, return_tensors="pt", add_special_tokens=False)
    assert inputs["input_ids"][0, 0].item() == tokenizer.bos_token_id
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=32, do_sample=False, min_new_tokens=32)
    expected = tuple(out[0, inputs["input_ids"].shape[1] :].tolist())
    assert final.token_ids == expected
