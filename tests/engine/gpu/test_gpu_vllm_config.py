"""vLLM's own config classes judging the app's GPU arguments on a faked CUDA platform.

The faked platform (tests/support/fake_cuda.py) runs in one subprocess for every card below: vLLM's
``AsyncEngineArgs(...).create_engine_config()`` builds the model, cache, scheduler, attention and
(optimized path) ``SpeculativeConfig`` from an E2B-shaped folder (tests/support/e2b_folder.py: the shipped
config, sparse weights of the real size, a sibling assistant), and vLLM's attention selector and
Gemma 4 drafter say which backend each layer kind (the drafter's too) gets. vLLM finds Triton
there, as on a card, so it takes Model Runner V2 and builds the drafter through V2's
``Gemma4Speculator`` (the CPU build runs V1). Nothing here runs a kernel. The memory plan itself
is tested in ``tests/engine/gpu/test_gpu_plan.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backend.engine.model.footprint import GIB
from tests.support.e2b_folder import make_e2b_folder

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def e2b_alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("lonely"), assistant=False)


CARDS = [
    {"key": "t4", "memory_gib": 16, "capability": [7, 5], "name": "Tesla T4"},
    {"key": "a100", "memory_gib": 80, "capability": [8, 0], "name": "NVIDIA A100-SXM4-80GB"},
    {"key": "l4", "memory_gib": 24, "capability": [8, 9], "name": "NVIDIA L4", "ablation": True},
    {"key": "rtx4080", "memory_gib": 16, "capability": [8, 9], "name": "NVIDIA GeForce RTX 4080"},
    {"key": "l40s", "memory_gib": 48, "capability": [8, 9], "name": "NVIDIA L40S"},
    {
        "key": "h100",
        "memory_gib": 80,
        "capability": [9, 0],
        "name": "NVIDIA H100 80GB HBM3",
        "fa4": True,
        "ablation": True,
    },
    {
        "key": "b200",
        "memory_gib": 80,
        "capability": [10, 0],
        "name": "NVIDIA B200 (80 GiB slice)",
        "fa4": True,
    },
    {"key": "rtx4090", "memory_gib": 24, "capability": [8, 9], "name": "NVIDIA GeForce RTX 4090"},
    {"key": "a100-40", "memory_gib": 40, "capability": [8, 0], "name": "NVIDIA A100-SXM4-40GB"},
    {"key": "b200-full", "memory_gib": 180, "capability": [10, 0], "name": "NVIDIA B200", "fa4": True},
    {
        "key": "fp16",
        "memory_gib": 24,
        "capability": [8, 9],
        "name": "NVIDIA L4",
        "settings": {"dtype": "float16"},
    },
    {"key": "alone", "memory_gib": 24, "capability": [8, 9], "name": "NVIDIA L4", "lonely": True},
    {
        "key": "ngram",
        "memory_gib": 24,
        "capability": [8, 9],
        "name": "NVIDIA L4",
        "lonely": True,
        "settings": {"speculation": "ngram"},
    },
    {
        "key": "per-kind",
        "memory_gib": 24,
        "capability": [8, 6],
        "name": "NVIDIA A10",
        "attention": {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}},
    },
    {
        "key": "full-flashinfer",
        "memory_gib": 80,
        "capability": [8, 0],
        "name": "NVIDIA A100-SXM4-80GB",
        "attention": {"backend_per_kind": {"full_attention": "FLASHINFER"}},
    },
    {
        "key": "full-flex",
        "memory_gib": 80,
        "capability": [8, 0],
        "name": "NVIDIA A100-SXM4-80GB",
        "attention": {"backend_per_kind": {"full_attention": "FLEX_ATTENTION"}},
    },
    {
        "key": "measured-per-kind",
        "memory_gib": 24,
        "capability": [8, 6],
        "name": "NVIDIA A10",
        "measured_attention": {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}},
    },
    {
        "key": "exact",
        "memory_gib": 80,
        "capability": [9, 0],
        "name": "NVIDIA H100",
        "fa4": True,
        "settings": {"exact": True},
    },
]


@pytest.fixture(scope="module")
def faked(e2b: Path, e2b_alone: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    specs = [{**card, "model": str(e2b_alone if card.get("lonely") else e2b)} for card in CARDS]
    path = tmp_path_factory.mktemp("fake-cuda") / "specs.json"
    path.write_text(json.dumps(specs))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "fake_cuda.py"), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("FAKE-CUDA-RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    return {
        card["key"]: result for card, result in zip(CARDS, json.loads(line.split(" ", 1)[1]), strict=True)
    }


def _vllm(result: dict[str, Any], path: str) -> dict[str, Any]:
    assert "vllm_error" not in result[path], result[path].get("vllm_error")
    return dict(result[path]["vllm"])


def _drafter_sliding(built: dict[str, Any]) -> str:
    """The backend vLLM's selector gives the drafter's sliding layers (gemma-chat's hooks on)."""
    assert built["model_runner"] == "v2" and built["drafter"]["class"] == "Gemma4Speculator"
    return str(built["drafter"]["patched"]["sliding_backend"])


def test_faked_gpu_is_read_through_vllms_platform(faked: dict[str, Any]) -> None:
    assert faked["l4"]["gpu"] == ["NVIDIA L4", 24 * GIB, [8, 9]]


def test_faked_refusals(faked: dict[str, Any]) -> None:
    assert "Tesla T4 has compute capability 7.5" in faked["t4"]["refused"]
    assert "float16 on NVIDIA L4" in faked["fp16"]["refused"]


@pytest.mark.parametrize(
    ("key", "mode", "attention"),
    [
        ("a100", "side-by-side", "TRITON_ATTN"),
        ("l4", "swap", "TRITON_ATTN"),
        ("rtx4080", "swap", "TRITON_ATTN"),
        ("l40s", "side-by-side", "TRITON_ATTN"),
        ("h100", "side-by-side", "FA4"),
        ("b200", "side-by-side", "FA4"),
    ],
)
def test_vllm_accepts_both_paths(faked: dict[str, Any], key: str, mode: str, attention: str) -> None:
    result = faked[key]
    assert result["mode"] == mode
    baseline, optimized = _vllm(result, "baseline"), _vllm(result, "optimized")
    for built, path in ((baseline, "baseline"), (optimized, "optimized")):
        assert built["device"] == "cuda" and built["dtype"] == "torch.bfloat16"
        assert built["gpu_memory_utilization"] == result["shares"][path]
        assert built["sleep_mode"] is built["offload_cudagraph"] is (mode == "swap")
        if attention == "FA4":
            assert built["flash_attn_version"] == 4 and built["attention_backend"] in (None, "FLASH_ATTN")
        else:
            assert built["attention_backend"] == "TRITON_ATTN"
    assert optimized["speculative_method"] == "mtp" and optimized["speculative_tokens"] == 2
    assert baseline["speculative_method"] is None
    assert baseline["model_runner"] == optimized["model_runner"] == "v2", "vLLM 0.32's default on a card"
    assert optimized["drafter"]["class"] == "Gemma4Speculator"
    assert optimized["async_scheduling"] == baseline["async_scheduling"]


def test_without_a_drafter_the_optimized_path_keeps_async_scheduling(faked: dict[str, Any]) -> None:
    alone = _vllm(faked["alone"], "optimized")
    assert alone["speculative_method"] is None and alone["async_scheduling"] is True
    # why no silent ngram: vLLM turns async scheduling off for it (the baseline keeps it)
    forced = _vllm(faked["ngram"], "optimized")
    assert forced["speculative_method"] == "ngram" and forced["async_scheduling"] is False


def test_exact_sets_batch_invariant_on_both_paths(faked: dict[str, Any]) -> None:
    """On an H100 each layer kind resolves, through vLLM's selector under batch invariance, to a
    backend with a batch-invariant kernel for its head size (left to vLLM: FlashAttention as FA2)."""
    for path in ("baseline", "optimized"):
        speculating = {
            "GEMMA_CHAT_LIVE_SPEC_METRICS": "1",
            "GEMMA_CHAT_DRAFT_SCHEDULE": "1",
            "GEMMA_CHAT_NO_PREFILL_DRAFTS": "1",
        }
        live = speculating if path == "optimized" else {}
        assert faked["exact"][path]["env"] == {"VLLM_BATCH_INVARIANT": "1", **live}
        for kind, layer in _vllm(faked["exact"], path)["layers"].items():
            assert layer.get("backend") == "TRITON_ATTN", (path, kind, layer)
            assert layer["batch_invariant"] and layer["head_size_ok"], (path, kind, layer)


def test_per_layer_kind_attention_is_a_candidate_vllm_accepts_on_triton_cards(faked: dict[str, Any]) -> None:
    from backend.engine.gpu.attention import SLIDING_FLASH_ATTENTION, ModelAttention, attention_candidates

    unshared = ModelAttention(kv_shared_full_layers=0)
    assert SLIDING_FLASH_ATTENTION in attention_candidates((8, 6), unshared).others
    assert attention_candidates((9, 0), unshared).others == ()
    built = _vllm(faked["per-kind"], "optimized")
    assert built["attention_backend"] == "TRITON_ATTN"  # the 512-dim full layers
    assert built["backend_per_kind"] == {"sliding_window": "FLASH_ATTN"}


def test_on_model_runner_v2_the_targets_per_kind_map_stays_off_the_drafter(faked: dict[str, Any]) -> None:
    """What a card runs: V2's ``Gemma4Speculator`` builds the drafter's config from the target's.
    By itself vLLM passes the sliding layers' FlashAttention on to the drafter (which its own code
    says cannot run there with the KV-shared cache); with gemma-chat's hooks the map is dropped and
    vLLM's selector gives the drafter's sliding layers the target's backend, Triton."""
    for key in ("per-kind", "measured-per-kind"):
        built = _vllm(faked[key], "optimized")
        assert built["model_runner"] == "v2" and built["layers"]["sliding"]["backend"] == "FLASH_ATTN"
        drafter = built["drafter"]
        assert drafter["class"] == "Gemma4Speculator"
        assert drafter["vllm_alone"]["backend_per_kind"] == {"sliding_window": "FLASH_ATTN"}
        assert drafter["vllm_alone"]["sliding_backend"] == "FLASH_ATTN"
        assert drafter["patched"] == {
            "backend_per_kind": {},
            "sliding_backend": "TRITON_ATTN",
            "full_backend": "TRITON_ATTN",
        }


def test_the_full_layers_other_backends_on_an_a100_leave_the_sliding_layers_and_the_drafter(
    faked: dict[str, Any],
) -> None:
    """bench's and the probe's other candidates for head_dim 512 on Ampere, through vLLM's selector:
    FlexAttention takes the full layers (head size and batch invariance accepted); FlashInfer is
    selected for them, and here stops at its missing wheel (the CPU build has none; vLLM's CUDA
    build ships it) — its head sizes, read in vLLM's source, include 512. The sliding layers and
    the drafter's stay on Triton either way."""
    import re

    import vllm

    flex = _vllm(faked["full-flex"], "optimized")
    full = {"backend": "FLEX_ATTENTION", "batch_invariant": True, "head_size_ok": True}
    assert flex["layers"]["full"] == full
    assert flex["layers"]["sliding"]["backend"] == "TRITON_ATTN"
    infer = _vllm(faked["full-flashinfer"], "optimized")
    refused = infer["layers"]["full"]["error"]
    assert "FLASHINFER" in refused and "No module named 'flashinfer'" in refused, refused
    assert infer["layers"]["sliding"]["backend"] == "TRITON_ATTN"
    for built in (flex, infer):
        assert _drafter_sliding(built) == "TRITON_ATTN", "vLLM's Gemma 4 drafter refuses the others"
    source = (Path(vllm.__file__).parent / "v1" / "attention" / "backends" / "flashinfer.py").read_text()
    sizes = re.search(r"def get_supported_head_sizes.*?return \[([\d, ]+)\]", source, re.S)
    assert sizes is not None and "512" in sizes.group(1).split(", ")


def test_a_measured_attention_choice_goes_to_the_optimized_path_only(faked: dict[str, Any]) -> None:
    """`paths --measure` stored FlashAttention for the sliding layers on an A10 (faster, same
    tokens): the optimized path's arguments carry it, vLLM builds it, the baseline keeps vLLM's."""
    result = faked["measured-per-kind"]
    built = _vllm(result, "optimized")
    assert built["backend_per_kind"] == {"sliding_window": "FLASH_ATTN"}
    assert built["attention_backend"] == "TRITON_ATTN" and built["speculative_method"] == "mtp"
    assert "1.12x over vLLM's own attention, the same greedy tokens" in result["optimized"]["attention_why"]
    assert "attention_config" not in result["baseline"]["args"]
    assert _vllm(result, "baseline")["backend_per_kind"] == {}
    plain = _drafter_sliding(_vllm(faked["l4"], "optimized"))
    assert plain == "TRITON_ATTN" and _drafter_sliding(built) == plain, (
        "the drafter attends as without the candidate (vLLM's Gemma 4 drafter refuses FlashAttention there)"
    )


@pytest.mark.parametrize(
    ("key", "seqs", "tokens"),
    [
        ("l4", 256, 2048),
        ("rtx4090", 256, 2048),
        ("a100-40", 256, 2048),
        ("a100", 256, 2048),
        ("h100", 1024, 8192),
        ("b200", 1024, 8192),
        ("b200-full", 1024, 16384),
    ],
)
def test_both_paths_batch_what_vllm_serve_would_on_the_card(
    faked: dict[str, Any], key: str, seqs: int, tokens: int
) -> None:
    """Issue 66: no throttled baseline. Each path's scheduler, as vLLM builds it from the app's
    arguments, has the limits ``vllm serve`` builds on that card (``create_engine_config`` in the
    API server's context, the same arguments less the limits) and vLLM's own default table gives;
    an engine in a process would have had 128 and 2,048."""
    for path in ("baseline", "optimized"):
        built = _vllm(faked[key], path)
        assert [built["max_num_seqs"], built["max_num_batched_tokens"]] == [seqs, tokens], (key, path)
        assert built["serve"] == {"built": [seqs, tokens], "table": [seqs, tokens]}, (key, path)
        assert faked[key][path]["args"]["max_num_seqs"] == str(seqs), "the app's own argument"


@pytest.mark.parametrize("key", ["l4", "a100", "h100", "b200-full"])
def test_on_model_runner_v2_a_step_asking_for_no_drafts_runs_no_drafter(
    faked: dict[str, Any], key: str
) -> None:
    """vLLM's own ``Gemma4Speculator`` (V2, what a card runs) as the optimized engine builds it: a
    step of 3 requests asking for no drafts answers -1 drafts without starting the drafter; vLLM
    alone starts it (its first pass runs before the zero check); dummy runs (start-up, CUDA graph
    capture) still reach it."""
    step = _vllm(faked[key], "optimized")["drafter"]["zero_draft_step"]
    assert step["patched_step"] == {"drafter_started": False, "answer": [[-1, -1]] * 3}
    assert step["vllm_alone_step"]["drafter_started"] is True
    assert step["patched_dummy_run"]["drafter_started"] is True
    assert faked[key]["optimized"]["env"]["GEMMA_CHAT_NO_PREFILL_DRAFTS"] == "1"
    assert "GEMMA_CHAT_NO_PREFILL_DRAFTS" not in faked[key]["baseline"]["env"]


@pytest.mark.parametrize("key", ["l4", "a100", "h100", "b200-full"])
def test_cuda_graphs_cover_every_draft_level_at_the_most_requests(faked: dict[str, Any], key: str) -> None:
    """Issue 66: vLLM's default graphs stop at 512 tokens, so at 256 requests 2 drafts (768 tokens)
    would run eager while no drafts replay a graph. The optimized engine's capture sizes, as vLLM
    builds them, hold every request count of its grid at each draft level; the baseline keeps
    vLLM's own."""
    optimized, baseline = _vllm(faked[key], "optimized"), _vllm(faked[key], "baseline")
    seqs, drafts = optimized["max_num_seqs"], optimized["speculative_tokens"]
    sizes = set(optimized["graph_sizes"])
    for level in range(drafts + 1):
        assert {n * (1 + level) for n in (1, 8, 64, 256, seqs)} <= sizes, (key, level)
    ceiling = 1024 if key.startswith("b200") else 512
    assert max(baseline["graph_sizes"]) == ceiling, "stock vLLM's default ceiling"
    assert max(optimized["graph_sizes"]) == seqs * (1 + drafts) > ceiling


@pytest.mark.parametrize("key", ["l4", "h100"])
def test_benchs_ablation_parts_on_a_card_are_engines_vllm_builds(faked: dict[str, Any], key: str) -> None:
    """Issue 66: on a card both paths batch alike, so `batch limits` runs nothing; `speculation`
    is the baseline's engine with the optimized path's drafts (its schedule, CUDA graphs and
    zero-draft skip), which vLLM builds with the same batch limits; no attention part where none
    was measured. The report's hardware is the card, read through vLLM's platform."""
    ablation = faked[key]["ablation"]
    parts = ablation["parts"]
    assert parts["batch limits"] is None and parts["attention"] is None
    speculation = parts["speculation"]
    assert {"speculative_config", "compilation_config", "env GEMMA_CHAT_NO_PREFILL_DRAFTS"} <= set(
        speculation["adds"]
    )
    built, optimized = speculation["vllm"], _vllm(faked[key], "optimized")
    assert built["speculative_method"] == "mtp" and built["model_runner"] == "v2"
    for field in ("max_num_seqs", "max_num_batched_tokens", "graph_sizes", "speculative_tokens"):
        assert built[field] == optimized[field], field
    assert built["gpu_memory_utilization"] == faked[key]["shares"]["baseline"], "the baseline's engine"
    card = ablation["card"]
    assert card["name"] == next(c["name"] for c in CARDS if c["key"] == key)
    assert card["memory_gib"] == next(c["memory_gib"] for c in CARDS if c["key"] == key)
