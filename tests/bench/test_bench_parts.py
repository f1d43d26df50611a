"""The bench's parts: model costs, machine roofs, the transformers peer, workloads, the dummy E2B."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from backend.assets import asset
from backend.bench.dummy import dummy_e2b_config, e2b_config, make_dummy_checkpoint
from backend.bench.peer import run_transformers_generate, run_transformers_single
from backend.bench.roofs import (
    Roofs,
    bandwidth_roof_tokens_per_s,
    compute_roof_tokens_per_s,
    decode_roof_tokens_per_s,
    measure_matmul_flops,
    measure_memory_bandwidth,
    measure_roofs,
    model_costs,
)
from backend.bench.workloads import load_workloads
from backend.checkpoints import GeneratedCheckpoint
from backend.checkpoints.tokenizer import TOKEN_ID

TEXT = "model.language_model."
LOOKUP_TABLES = (f"{TEXT}embed_tokens.weight", f"{TEXT}embed_tokens_per_layer.weight")


def _text_decoder_shapes(model_dir: Path) -> dict[str, list[int]]:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:  # not iterable: needs .keys()
        return {k: weights.get_slice(k).get_shape() for k in weights.keys() if k.startswith(TEXT)}  # noqa: SIM118


def test_model_costs_match_the_tiny_checkpoints_weights(tiny: GeneratedCheckpoint) -> None:
    config = json.loads((tiny.model / "config.json").read_text())
    shapes = _text_decoder_shapes(tiny.model)
    costs = model_costs(config)

    matrices = {k: s for k, s in shapes.items() if len(s) == 2 and k not in LOOKUP_TABLES}
    tied_lm_head = math.prod(shapes[f"{TEXT}embed_tokens.weight"])
    assert costs.matmul_params == sum(math.prod(s) for s in matrices.values()) + tied_lm_head
    assert costs.total_params == sum(math.prod(s) for s in shapes.values())
    for index, layer in enumerate(costs.layers):
        in_layer = [s for k, s in matrices.items() if k.startswith(f"{TEXT}layers.{index}.")]
        assert layer.matmul_params == sum(math.prod(s) for s in in_layer), index
    assert costs.dtype == "float32"
    assert costs.flops_per_token == 2 * costs.matmul_params
    assert costs.weight_bytes_per_token == 4 * costs.matmul_params
    assert model_costs(config, dtype="bfloat16").weight_bytes_per_token == 2 * costs.matmul_params


def test_model_costs_of_e2b_are_its_published_sizes() -> None:
    costs = model_costs(e2b_config())
    # 5.1B in all with the towers; 2.3B "effective" without the per-layer embedding table.
    assert costs.per_layer_embedding_params == 262144 * 35 * 256
    assert costs.total_params == 4_628_569_379  # = transformers' own count (meta-device model)
    assert 2.2e9 < costs.effective_params < 2.4e9
    assert costs.weight_bytes_per_token == 2 * costs.matmul_params  # bfloat16
    assert [layer.head_dim for layer in costs.layers[:5]] == [256, 256, 256, 256, 512]
    assert sum(layer.kv_shared for layer in costs.layers) == 20
    sliding = costs.layers[0]
    assert costs.attention_flops_per_token(100_000) > costs.attention_flops_per_token(512)
    assert sliding.sliding_window == 512


def test_model_costs_count_like_transformers_on_the_published_config_form() -> None:
    """``global_head_dim`` (published) instead of ``per_layer_config`` (saved by transformers)."""
    import torch
    from transformers import Gemma4Config, Gemma4ForCausalLM

    config = e2b_config()
    small = {"hidden_size": 64, "intermediate_size": 96, "vocab_size": 300, "vocab_size_per_layer_input": 300}
    small |= {"hidden_size_per_layer_input": 8, "num_hidden_layers": 10, "num_kv_shared_layers": 4}
    small["layer_types"] = config["text_config"]["layer_types"][:10]
    config["text_config"] |= small
    with torch.device("meta"):
        model = Gemma4ForCausalLM(Gemma4Config(**config).text_config)
    counted = sum(t.numel() for k, t in model.state_dict().items() if k != "lm_head.weight")
    assert model_costs(config).total_params == counted


def test_model_costs_reject_what_they_cannot_count() -> None:
    with pytest.raises(ValueError, match="missing"):
        model_costs({"text_config": {"hidden_size": 8}})
    with pytest.raises(ValueError, match="dtype"):
        model_costs(e2b_config(), dtype="int3")


def test_measurements_are_positive_and_restore_threads() -> None:
    import torch

    before = torch.get_num_threads()
    assert measure_matmul_flops("float32", size=128, threads=1, seconds=0.05) > 1e6
    assert measure_memory_bandwidth(threads=1, mib=4, seconds=0.05) > 1e6
    roofs = measure_roofs("float32", threads=1, seconds=0.05)
    assert (roofs.threads, roofs.dtype, roofs.device) == (1, "float32", "cpu")
    assert torch.get_num_threads() == before


def test_roofs_on_a_gpu_open_no_cuda_context_in_the_app_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 57, item 6b: measuring opens a CUDA context, whose memory would stay on the card (the
    plan gave it to the engines); on a GPU ``measure_roofs`` hands the measurement to a child."""
    import torch

    from backend.bench import roofs

    def here(*args: object, **kwargs: object) -> None:
        raise AssertionError("CUDA initialised / roofs measured in the app process")

    monkeypatch.setattr(torch.cuda, "_lazy_init", here)
    monkeypatch.setattr(torch.cuda, "init", here)
    monkeypatch.setattr(roofs, "measure_roofs_here", here)
    asked: list[tuple[object, ...]] = []
    stand_in = Roofs(flops_per_s=1e14, bytes_per_s=2e12, threads=15, dtype="bfloat16", device="cuda")

    def apart(*args: object) -> Roofs:
        asked.append(args)
        return stand_in

    monkeypatch.setattr(roofs, "measure_roofs_apart", apart)
    assert roofs.measure_roofs("bfloat16", 15, "cuda", 0.1) is stand_in
    assert asked == [("bfloat16", 15, "cuda", 0.1)]


def test_roofs_measured_apart_come_from_a_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child boundary itself, on the CPU: this process's measuring function refuses, so the
    figures can only come from the spawned child, which has exited when they arrive."""
    import multiprocessing

    from backend.bench import roofs

    def here(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured in the app process")

    monkeypatch.setattr(roofs, "measure_roofs_here", here)
    measured = roofs.measure_roofs_apart("float32", 1, "cpu", 0.05)
    assert measured.flops_per_s > 1e6 and measured.bytes_per_s > 1e6
    assert (measured.threads, measured.dtype, measured.device) == (1, "float32", "cpu")
    assert multiprocessing.active_children() == []


def test_token_roofs_divide_the_machine_by_the_model() -> None:
    costs = model_costs(e2b_config())
    roofs = Roofs(flops_per_s=4.5e11, bytes_per_s=4.5e10, threads=2, dtype="bfloat16", device="cpu")
    assert compute_roof_tokens_per_s(costs, roofs) == pytest.approx(4.5e11 / costs.flops_per_token)
    assert bandwidth_roof_tokens_per_s(costs, roofs) == pytest.approx(4.5e10 / costs.weight_bytes_per_token)
    assert decode_roof_tokens_per_s(costs, roofs, 1) == bandwidth_roof_tokens_per_s(costs, roofs)
    assert decode_roof_tokens_per_s(costs, roofs, 1000) == compute_roof_tokens_per_s(costs, roofs)


def _rendered(model_dir: Path, questions: list[str]) -> list[str]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    chats = [[{"role": "user", "content": q}] for q in questions]
    return [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]


def test_transformers_peer_batched_and_single_agree(tiny: GeneratedCheckpoint) -> None:
    prompts = _rendered(tiny.model, ["Explain the tides.", "Write a haiku about rain in a small town."])
    batched = run_transformers_generate(str(tiny.model), prompts, 4, batch_size=2, dtype="float32", threads=1)
    assert [len(ids) for ids in batched.token_ids] == [4, 4]
    assert batched.generated_tokens == 8 and batched.tokens_per_s > 0 and batched.threads == 1
    single = run_transformers_single(str(tiny.model), prompts, 4, dtype="float32", threads=1)
    assert single.token_ids == batched.token_ids  # left padding changes nothing
    assert single.mean_ttft_s > 0 and single.mean_decode_tokens_per_s > 0
    with pytest.raises(ValueError, match="<bos>"):
        run_transformers_generate(str(tiny.model), ["no bos"], 1, batch_size=1, dtype="float32", threads=1)


def test_e2b_config_loads_with_transformers() -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(asset("gemma4_e2b_config.json"))
    text = config.text_config
    assert type(config).__name__ == "Gemma4Config" and text.num_hidden_layers == 35
    assert [text.per_layer_config[i].head_dim for i in (0, 4)] == [256, 512]
    assert (text.vocab_size, text.num_kv_shared_layers, text.use_double_wide_mlp) == (262144, 20, True)
    assert config.vision_config.default_output_length == 280
    assert config.audio_config.output_proj_dims == text.hidden_size


def test_dummy_checkpoint_has_e2b_shapes_and_our_token_ids(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    out = make_dummy_checkpoint(tmp_path / "e2b")
    assert not list(out.glob("*.safetensors"))
    config = AutoConfig.from_pretrained(out)
    assert config.image_token_id == TOKEN_ID["<|image|>"] and config.text_config.vocab_size == 262144
    assert config.text_config.eos_token_id == dummy_e2b_config()["eos_token_id"]
    assert len(AutoTokenizer.from_pretrained(out)) == config.text_config.vocab_size
    assert {"generation_config.json", "processor_config.json", "chat_template.jinja"} <= {
        p.name for p in out.iterdir()
    }


def test_shipped_workloads_load() -> None:
    workloads = load_workloads()
    assert len(workloads.throughput) == 32
    assert {p.category for p in workloads.throughput} == {"explanation", "code", "writing"}
    assert [len(c.turns) for c in workloads.chat] == [4, 4, 4, 4]
    assert sorted(m.media.kind for m in workloads.media) == ["audio", "audio", "image", "image"]
    image = next(m for m in workloads.media if m.media.kind == "image")
    assert image.multi_modal_data()["image"].size == (image.media.args["width"], image.media.args["height"])
    audio = next(m for m in workloads.media if m.media.kind == "audio")
    samples, rate = audio.multi_modal_data()["audio"]
    assert rate == 16000 and len(samples) == int(audio.media.args["seconds"] * rate)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["media"][0]["media"].update(generator="backend.media.synthetic.video"),
            "unknown generator",
        ),
        (lambda d: d["media"][0]["media"].update(kind="audio"), "makes image"),
        (lambda d: d["media"][2]["media"]["args"].update(seconds=60), "audio must last"),
        (lambda d: d["media"][0]["media"]["args"].pop("width"), "bad args"),
        (lambda d: d["chat"][0].update(turns=["only one"]), "at least two"),
        (lambda d: d["throughput"][1].update(id=d["throughput"][0]["id"]), "duplicate ids"),
        (lambda d: d["throughput"][0].pop("text"), "missing field"),
    ],
)
def test_workload_errors_say_what_is_wrong(tmp_path: Path, change: object, message: str) -> None:
    data = json.loads(asset("bench/workloads.json").read_text())
    change(data)  # type: ignore[operator]
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_workloads(path)
