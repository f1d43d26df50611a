"""Generated Gemma 4 checkpoints: the real architecture, deterministic, loadable by transformers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from backend.checkpoints import GeneratedCheckpoint, make_checkpoint
from backend.checkpoints.tokenizer import NAMED_TOKENS, SPECIAL_TOKENS, STOP_TOKEN_IDS


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def test_same_seed_same_bytes_other_seed_other_weights(tiny: GeneratedCheckpoint, tmp_path: Path) -> None:
    again = make_checkpoint(tmp_path / "again", "tiny", seed=0)
    other = make_checkpoint(tmp_path / "other", "tiny", seed=1)
    assert _digest(again.model) == _digest(tiny.model)
    assert _digest(again.drafter) == _digest(tiny.drafter)
    assert _digest(other.model)["model.safetensors"] != _digest(tiny.model)["model.safetensors"]


def test_architecture_is_gemma4_with_every_feature(tiny: GeneratedCheckpoint) -> None:
    config = json.loads((tiny.model / "config.json").read_text())
    assert config["architectures"] == ["Gemma4ForConditionalGeneration"]
    text = config["text_config"]
    assert {"sliding_attention", "full_attention"} <= set(text["layer_types"])
    full_layers = [i for i, kind in enumerate(text["layer_types"]) if kind == "full_attention"]
    head_dims = {int(i): layer["head_dim"] for i, layer in text["per_layer_config"].items()}
    assert all(head_dims[i] != text["head_dim"] for i in full_layers)  # global head dim differs
    assert text["num_kv_shared_layers"] > 0
    assert text["hidden_size_per_layer_input"] > 0
    assert config["vision_config"]["default_output_length"] == 280
    assert config["audio_config"]["subsampling_conv_channels"][0] == 128
    drafter = json.loads((tiny.drafter / "config.json").read_text())
    assert drafter["model_type"] == "gemma4_assistant"
    assert drafter["backbone_hidden_size"] == text["hidden_size"]
    assert drafter["use_ordered_embeddings"] is False


def test_loads_in_transformers_with_towers_and_processor(tiny: GeneratedCheckpoint) -> None:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny.model)
    assert model.model.vision_tower is not None and model.model.audio_tower is not None
    processor = AutoProcessor.from_pretrained(tiny.model)
    tokenizer = processor.tokenizer
    for attribute, token in NAMED_TOKENS.items():
        assert getattr(tokenizer, attribute) == token
    assert tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == list(range(len(SPECIAL_TOKENS)))
    assert processor.image_token_id == tokenizer.convert_tokens_to_ids("<|image|>")
    generation = json.loads((tiny.model / "generation_config.json").read_text())
    assert generation["eos_token_id"] == list(STOP_TOKEN_IDS)


def test_drafter_loads_in_transformers(tiny: GeneratedCheckpoint) -> None:
    from transformers import AutoConfig, Gemma4AssistantForCausalLM

    config = AutoConfig.from_pretrained(tiny.drafter)
    drafter = Gemma4AssistantForCausalLM.from_pretrained(tiny.drafter)
    assert config.text_config.num_kv_shared_layers == config.text_config.num_hidden_layers
    assert sum(p.numel() for p in drafter.parameters()) > 0


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        (
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            None,
            "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image"}, {"type": "audio"}, {"type": "text", "text": "What?"}],
                }
            ],
            None,
            "<|turn>user\n<|image|><|audio|>What?<turn|>\n<|turn>model\n",
        ),
        (
            [{"role": "user", "content": "Weather?"}],
            [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather",
                        "parameters": {"type": "object"},
                    },
                }
            ],
            '<|turn>system\n<|tool>declaration:get_weather{description:<|"|>Weather<|"|>,'
            'parameters:{type:<|"|>OBJECT<|"|>}}<tool|><turn|>\n<|turn>user\nWeather?<turn|>\n<|turn>model\n',
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "f", "arguments": {"a": "b", "n": 3}}}],
                    "tool_responses": [{"name": "f", "response": {"ok": True}}],
                },
            ],
            None,
            '<|turn>user\nx<turn|>\n<|turn>model\n<|tool_call>call:f{a:<|"|>b<|"|>,n:3}<tool_call|>'
            "<|tool_response>response:f{ok:true}<tool_response|>",
        ),
    ],
)
def test_chat_template_renders_gemma4_format(
    tiny: GeneratedCheckpoint, messages: list[dict[str, object]], tools: object, expected: str
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny.model)
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text == "<bos>" + expected


def test_a_repeating_checkpoint_repeats_and_never_stops(tiny: GeneratedCheckpoint, tmp_path: Path) -> None:
    """``make-model --repeating``: the same shapes, each layer's branch norms scaled down and the stop
    tokens' embeddings zero, so greedy decoding repeats itself to the token budget — the reply that
    prompt-lookup drafts are accepted on. Fails if the scale is not applied (the tiny model's reply
    then varies) or a stop token can still win."""
    import torch
    import transformers

    from backend.checkpoints.sizes import TINY, e2b, repeating

    assert repeating(e2b()).branch_scale == 0.3135  # the share measured at E2B's width
    shape = repeating(TINY)
    made = make_checkpoint(tmp_path / "rep", shape)
    scale = json.loads((made.model.parent / "gemma-chat-checkpoint.json").read_text())["branch_scale"]
    assert scale == shape.branch_scale < 0.1
    plain_model = transformers.AutoModelForImageTextToText.from_pretrained(tiny.model).eval()
    model = transformers.AutoModelForImageTextToText.from_pretrained(made.model).eval()
    plain = dict(plain_model.model.language_model.named_parameters())
    for name, weight in model.model.language_model.named_parameters():
        if ".post_feedforward_layernorm." in name:
            assert torch.allclose(weight, plain[name] * scale)
    embed = model.model.language_model.embed_tokens.weight
    assert not embed[list(STOP_TOKEN_IDS)].any()
    prompt = torch.tensor([[2, 105, *range(300, 320), 106, 105]])
    with torch.no_grad():
        out = model.generate(input_ids=prompt, max_new_tokens=48, do_sample=False)
    reply = out[0, prompt.shape[1] :].tolist()
    assert len(reply) == 48 and not set(reply) & set(STOP_TOKEN_IDS)
    assert len(set(reply[8:])) <= 2, reply  # it settles into a repeat
