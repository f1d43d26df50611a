"""Choosing the optimized path's speculation from measured figures, keeping the choice, and applying it."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.checkpoints import GeneratedCheckpoint
from backend.config.settings import EngineSettings
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.probe import probe
from backend.engine.probe.probe import measure_speculation
from backend.engine.speculation.choice import (
    ProbeRun,
    SpeculationChoice,
    choice_key,
    choose,
    choose_attention,
    tokens_per_step,
)
from backend.engine.speculation.kept import forget_choice, store_choice, stored_choice

pytestmark = (
    pytest.mark.second_lane
)  # python3 -m tests: an engine test of the second lane (tests/__main__.py)

PLAIN = ProbeRun("none", 0, (100.0, 100.0, 100.0))


def test_tokens_per_step_for_fewer_drafts_follow_from_the_histogram() -> None:
    histogram = (10, 20, 30, 40)  # drafted steps that accepted 0, 1, 2, 3 of 3 drafts
    assert tokens_per_step(histogram, 3) == pytest.approx(1 + (20 + 60 + 120) / 100)
    assert tokens_per_step(histogram, 1) == pytest.approx(1 + 90 / 100)
    assert tokens_per_step((), 3) == 1.0
    run = ProbeRun("mtp", 3, (150.0,), histogram, decode_steps=100)
    assert run.position_acceptance() == pytest.approx([0.9, 0.7, 0.4])


def test_undrafted_steps_count_one_token_each() -> None:
    """As measured with ngram on the demo model: most steps find no match and carry no draft.
    vLLM's histogram (scheduler.py) counts only the drafted ones; the engine's iteration records
    count them all."""
    histogram = (21, 4, 13, 4, 19)  # 61 drafted steps
    run = ProbeRun("ngram", 4, (76.0,), histogram, decode_steps=261, decode_tokens=261 + 4 + 26 + 12 + 76)
    assert run.undrafted_steps == 200
    assert run.tokens_per_step() == pytest.approx(run.decode_tokens / run.decode_steps)
    assert run.tokens_per_step() == pytest.approx(1 + 118 / 261)
    assert tokens_per_step(histogram, 4) == pytest.approx(1 + 118 / 61), "drafted steps alone overstate it"


def test_the_fastest_measured_choice_wins() -> None:
    mtp1 = ProbeRun("mtp", 1, (120.0, 125.0, 118.0))
    mtp2 = ProbeRun("mtp", 2, (140.0, 150.0, 130.0))
    ngram = ProbeRun("ngram", 4, (90.0, 95.0, 101.0))
    choice = choose(PLAIN, [mtp1, mtp2, ngram])
    assert (choice.method, choice.drafts) == ("mtp", 2)
    assert choice.speedup == pytest.approx(1.4) and (choice.speedup_low, choice.speedup_high) == (1.3, 1.5)
    assert "mtp with 2 drafts, 1.40x one request (1.30–1.50" in choice.describe()


def test_a_choice_the_prompts_disagree_on_is_no_choice() -> None:
    """Faster on the median but slower on one prompt: within noise, so no speculation."""
    split = ProbeRun("mtp", 2, (130.0, 140.0, 95.0))
    assert choose(PLAIN, [split]).method == "none"


def test_no_speculation_when_none_pays_off() -> None:
    useless = ProbeRun("mtp", 4, (40.0, 41.0, 39.0), (100, 0, 0, 0, 0))
    choice = choose(PLAIN, [useless])
    assert (choice.method, choice.drafts, choice.speedup) == ("none", 0, 1.0)
    assert "no speculation beat plain decoding" in choice.describe()


def test_a_candidate_whose_tokens_differ_is_never_chosen() -> None:
    """The fastest run changed the greedy tokens of one prompt (a verifying step summed in another
    order): reported, not chosen; the next fastest with the same tokens wins."""
    fastest = ProbeRun("mtp", 3, (200.0, 210.0, 190.0), diverged=(1,))
    exact = ProbeRun("mtp", 2, (140.0, 150.0, 130.0))
    choice = choose(PLAIN, [fastest, exact])
    assert (choice.method, choice.drafts) == ("mtp", 2)
    assert "mtp@3 200 tok/s" in choice.describe() and "tokens differ on 1 of 3 prompts: not eligible" in (
        choice.describe()
    )
    assert choose(PLAIN, [fastest]).method == "none"


SLIDING = '{"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}'


def test_an_attention_candidate_is_kept_only_faster_on_every_prompt_with_the_same_tokens() -> None:
    mtp2 = ProbeRun("mtp", 2, (140.0, 150.0, 130.0))
    choice = choose(PLAIN, [mtp2])
    faster = ProbeRun("mtp", 2, (160.0, 170.0, 150.0), attention=SLIDING)
    kept = choose_attention(choice, mtp2, [faster])
    assert kept.attention == SLIDING and kept.attention_speedup == pytest.approx(1.143, abs=1e-3)
    assert kept.attention_config() == {"backend_per_kind": {"sliding_window": "FLASH_ATTN"}}
    assert "attention: sliding_window on FLASH_ATTN, 1.14x on that" in kept.describe()
    assert "mtp@2 + sliding_window on FLASH_ATTN 160 tok/s" in kept.describe()
    assert (kept.method, kept.drafts) == ("mtp", 2), "the speculation stays"
    different = ProbeRun("mtp", 2, (160.0, 170.0, 150.0), attention=SLIDING, diverged=(0,))
    split = ProbeRun("mtp", 2, (160.0, 170.0, 120.0), attention=SLIDING)
    for run in (different, split):
        refused = choose_attention(choice, mtp2, [run])
        assert refused.attention == "" and refused.attention_config() is None
        assert "attention: vLLM's own (the other candidates were not faster with the same tokens)" in (
            refused.describe()
        )
    assert SpeculationChoice.from_json(kept.to_json()) == kept
    old = kept.to_json()
    for field in ("attention", "attention_speedup"):
        del old[field]
    for run in old["runs"]:
        del run["attention"], run["diverged"]
    assert SpeculationChoice.from_json(old).attention == "", "a choice stored before reads as vLLM's"


def test_a_prompts_rate_is_the_median_of_its_rounds(tiny: GeneratedCheckpoint) -> None:
    """One slow moment of the machine in one round does not decide a prompt's ratio."""
    source = ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")
    candidate = probe._Candidate(
        "mtp", 2, source, engine_config(EnginePath.optimized(), source, EngineSettings())
    )
    candidate.rates = {"probe-a": [200.0, 60.0, 210.0], "probe-b": [150.0, 155.0, 400.0]}
    assert candidate.run(candidate).rates == (200.0, 155.0)


def test_the_choice_key_follows_the_engine_environment(
    tiny: GeneratedCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")
    settings = EngineSettings(dtype="bfloat16")
    key = choice_key(source, settings, gpu=False)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    assert choice_key(source, settings, gpu=False) != key, "another executor"
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    assert choice_key(source, settings.model_copy(update={"cpu_all_cores": True}), gpu=False) != key
    assert choice_key(source, settings, gpu=False) == key
    from backend.kernels import bf16_linear

    built = tiny.model / "bf16_linear-0123456789abcdef.so"
    rebuilt = tiny.model / "bf16_linear-fedcba9876543210.so"
    monkeypatch.setattr(bf16_linear, "for_engine", lambda: (built, "compiled"))
    with_kernel = choice_key(source, settings, gpu=False)
    monkeypatch.setattr(bf16_linear, "for_engine", lambda: (rebuilt, "compiled"))
    assert choice_key(source, settings, gpu=False) != with_kernel, "another build of the linear kernel"
    monkeypatch.setattr(bf16_linear, "for_engine", lambda: (None, "no C compiler"))
    assert choice_key(source, settings, gpu=False) != with_kernel, "no linear kernel"
    from backend.engine.cpu import env as cpu_env

    drafting = choice_key(source, settings, gpu=False)
    fewer = dict(list(cpu_env.speculating_cpu_env().items())[:-1])
    monkeypatch.setattr(cpu_env, "speculating_cpu_env", lambda one_pass=False: fewer)
    assert choice_key(source, settings, gpu=False) != drafting, "the drafter run another way"


def test_the_choice_key_follows_the_files_not_where_they_lie(
    tiny: GeneratedCheckpoint, tmp_path: Path
) -> None:
    """A fresh clone or a moved checkout keeps the measurement; other weights do not."""
    import shutil

    settings = EngineSettings(dtype="bfloat16")
    key = choice_key(ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny"), settings, gpu=False)
    model = shutil.copytree(tiny.model, tmp_path / "m")
    drafter = shutil.copytree(tiny.drafter, tmp_path / "d")
    moved = ModelSource(path=model, drafter=drafter, name="tiny")
    assert choice_key(moved, settings, gpu=False) == key
    assert choice_key(ModelSource(path=model, drafter=None, name="tiny"), settings, gpu=False) != key
    weights = next(model.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the same shapes, other weights
    weights.write_bytes(bytes(data))
    assert choice_key(moved, settings, gpu=False) != key


def test_a_stored_choice_shapes_the_optimized_path_only(tiny: GeneratedCheckpoint) -> None:
    """On a CPU the optimized engine always starts with its drafter and no drafts; the kept choice
    (or, without one, the first start's measurement) sets how many it proposes once it is up."""
    source = ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")
    settings = EngineSettings(dtype="bfloat16", max_model_len=4096)  # not the engine fixtures' dtype
    before = engine_config(EnginePath.optimized(), source, settings)
    spec = before.args["speculative_config"].value
    assert spec["model"] == str(tiny.drafter) and spec["num_speculative_tokens"] == 4
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 4, 0], [5, 65536, 0]], "none until set"
    assert before.drafts is not None and (before.drafts.method, before.drafts.most) == ("mtp", 4)
    assert "decided at this path's first start" in before.notes[0]
    key = choice_key(source, settings, gpu=False)
    assert before.drafts.key == key
    fast_ngram = ProbeRun("ngram", 3, (200.0, 210.0, 190.0), (0, 0, 0, 100), 100, 400, 5.0)
    store_choice(key, choose(PLAIN, [fast_ngram]))
    assert stored_choice(key) is not None and stored_choice(key) == choose(PLAIN, [fast_ngram])
    after = engine_config(EnginePath.optimized(), source, settings)
    spec = after.args["speculative_config"].value
    assert spec["method"] == "ngram" and after.drafts is not None and after.drafts.method == "ngram"
    assert after.notes[0].startswith("NGRAM ×3, measured 2.00x here")
    assert choice_key(source, EngineSettings(dtype="float32"), gpu=False) != key, "per dtype"
    store_choice(key, choose(PLAIN, [ProbeRun("mtp", 4, (10.0, 10.0, 10.0), (100, 0, 0, 0, 0))]))
    slow = engine_config(EnginePath.optimized(), source, settings)
    assert slow.notes[0].startswith("no speculation: verifying 4 drafts costs 10.0× a plain step here")
    assert "speculative_config" not in engine_config(EnginePath.baseline(), source, settings).args
    optimized = EnginePath.optimized()
    forced = engine_config(optimized, source, settings.model_copy(update={"speculation": "mtp"}))
    assert forced.args["speculative_config"].value["model"] == str(tiny.drafter), "settings win"
    assert forced.drafts is None and forced.args["speculative_config"].value["num_speculative_tokens"] == 2
    forget_choice(key)
    assert engine_config(EnginePath.optimized(), source, settings).notes == before.notes
    off = engine_config(optimized, source, settings.model_copy(update={"speculation": "none"}))
    assert "speculative_config" not in off.args and "speculation off" in off.notes[0] and off.drafts is None


@pytest.mark.engine
async def test_the_probe_measures_every_step_on_the_real_engine(
    tiny: GeneratedCheckpoint, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each candidate's steps come from the engine's own iteration records, drafted or not, and
    agree with the tokens it generated; each timed request waits for the last engine to go quiet."""
    pauses: list[float | None] = []
    settle = probe.settle

    async def recorded_settle(seconds: float | None = None) -> None:
        pauses.append(seconds)
        await settle(seconds)

    monkeypatch.setattr(probe, "settle", recorded_settle)
    source = ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")
    settings = EngineSettings(dtype="float32", max_model_len=1024)
    said: list[str] = []
    # the attention stage as it runs on a Triton card, with the CPU's own backend as the candidate
    attention = {"backend_per_kind": {"sliding_window": "CPU_ATTN"}}
    choice = await measure_speculation(
        source,
        settings,
        gemma_home,
        said.append,
        drafts=(2,),
        prompts=2,
        rounds=2,
        store=False,
        attention=[attention],
        load_levels=(),  # measured on the real engine in test_first_start_engine.py
    )
    runs = {run.label(): run for run in choice.runs}
    stage = next(label for label in runs if "CPU_ATTN" in label)
    assert stage.startswith(choice.runs[0].label() if choice.method == "none" else f"{choice.method}@")
    assert all(run.diverged == () for run in runs.values()), "float32: every candidate keeps the tokens"
    assert choice.attention in ("", '{"backend_per_kind": {"sliding_window": "CPU_ATTN"}}')
    assert any(line.startswith("attention: 1 candidate(s) with") for line in said)
    del runs[stage]
    assert set(runs) == {"none", "mtp@2", "ngram@4"}
    assert any("in turn" in line for line in said), "candidates interleaved"
    assert any(line.startswith("round 2 of 2") for line in said), "the prompts ran again"
    for run in runs.values():
        assert len(run.rates) == 2 and all(rate > 0 for rate in run.rates)
        assert run.decode_steps > 0 and run.step_ms is not None and run.step_ms > 0
        # a step's record covers its forward pass and sampling: a good part of the time a step
        # takes at the measured rate (the uniprocess executor's records once read about zero)
        interval_ms = 1000 * run.tokens_per_step() / run.decode_tokens_per_s
        assert run.step_ms > 0.2 * interval_ms, (run.label(), run.step_ms, interval_ms)
        assert run.decode_steps >= sum(run.histogram), "every step counted, not only the drafted"
        # the last step of a request may be recorded after its output: at most one a prompt missing
        assert run.decode_tokens - 2 * (1 + run.drafts) <= run.tokens_per_step() * run.decode_steps
        assert run.tokens_per_step() * run.decode_steps <= run.decode_tokens + 2
    assert runs["none"].tokens_per_step() == 1.0
    # one pause (vLLM's window) before each candidate's prompt, each round: 3 candidates, then the
    # attention candidate alone, 2 prompts x 2 rounds each
    assert pauses == [None] * 16
    assert runs["mtp@2"].histogram, "the drafter drafted"
    assert stored_choice(choice_key(source, settings, gpu=False)) is None, "store=False keeps nothing"


def test_each_cpu_class_says_what_the_optimized_path_adds() -> None:
    from backend.engine.cpu.classes import AMX, AVX2, NATIVE_BF16, OTHER, cpu_class, describe_classes

    assert cpu_class(["avx2"]) == AVX2 and "linear kernel" in AVX2.adds
    assert cpu_class(["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]) == AMX
    assert cpu_class(["avx2", "avx512f", "avx512_bf16"]) == NATIVE_BF16, "AMD EPYC Zen 4"
    assert "one-pass kernel" in NATIVE_BF16.adds and "one-pass kernel" in AMX.adds and cpu_class([]) == OTHER
    assert "row by row" in NATIVE_BF16.adds, "a layer the kernel cannot prove (AMX's) is named"
    lines = describe_classes(["avx2"])
    assert len(lines) == 4 and lines[0].lstrip().startswith("* AVX2") and "*" not in lines[1][:4]
