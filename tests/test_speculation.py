"""Choosing the optimized path's speculation from measured figures, keeping the choice, and applying it."""

from __future__ import annotations

import pytest

from backend.checkpoints import GeneratedCheckpoint
from backend.engine.model_source import ModelSource
from backend.engine.profiles import EngineProfile, engine_config
from backend.engine.speculation.choice import (
    ProbeRun,
    choice_key,
    choose,
    forget_choice,
    store_choice,
    stored_choice,
    tokens_per_step,
)
from backend.settings import EngineSettings

PLAIN = ProbeRun("none", 0, 100.0)


def test_tokens_per_step_for_fewer_drafts_follow_from_the_histogram() -> None:
    histogram = (10, 20, 30, 40)  # steps that accepted 0, 1, 2, 3 of 3 drafts
    assert tokens_per_step(histogram, 3) == pytest.approx(1 + (20 + 60 + 120) / 100)
    assert tokens_per_step(histogram, 1) == pytest.approx(1 + 90 / 100)
    assert tokens_per_step((), 3) == 1.0
    run = ProbeRun("mtp", 3, 150.0, histogram)
    assert run.position_acceptance() == pytest.approx([0.9, 0.7, 0.4])


def test_the_fastest_predicted_choice_wins() -> None:
    # plain step 10 ms; ngram's 4-draft step (drafting is free) 20 ms = the verify cost;
    # MTP's 4-draft step 24 ms, so 1 ms per drafter pass. MTP accepts 2 of 4 drafts every step.
    mtp = ProbeRun("mtp", 4, 125.0, (0, 0, 100, 0, 0))
    ngram = ProbeRun("ngram", 4, 65.0, (70, 30, 0, 0, 0))
    assert mtp.step_time_s() == pytest.approx(0.024) and ngram.step_time_s() == pytest.approx(0.020)
    choice = choose(PLAIN, [mtp, ngram])
    assert (choice.method, choice.drafts) == ("mtp", 2)
    # k=2: 3 tokens per step of 20 + 2 x 1 ms, against 1 token per 10 ms
    assert choice.predicted_speedup == pytest.approx(3 / 0.022 * 0.010, abs=1e-3)
    assert "mtp with 2 drafts" in choice.describe() and "accepted 100%/100%/0%/0%" in choice.describe()


def test_a_costly_verify_step_means_no_speculation() -> None:
    """As measured for the demo model on a 2-core CPU: 90% first-draft acceptance, still slower."""
    plain = ProbeRun("none", 0, 78.7)
    mtp = ProbeRun("mtp", 4, 80.82, (11, 18, 29, 16, 38))
    ngram = ProbeRun("ngram", 4, 76.36, (21, 4, 13, 4, 19))
    assert choose(plain, [mtp, ngram]).method == "none"


def test_no_speculation_when_none_pays_off() -> None:
    useless = ProbeRun("mtp", 4, 40.0, (100, 0, 0, 0, 0))
    choice = choose(PLAIN, [useless])
    assert (choice.method, choice.drafts, choice.predicted_speedup) == ("none", 0, 1.0)


def test_a_stored_choice_shapes_the_optimized_path_only(tiny: GeneratedCheckpoint) -> None:
    source = ModelSource(path=tiny.model, drafter=tiny.drafter, name="tiny")
    settings = EngineSettings(dtype="bfloat16", max_model_len=4096)  # not the engine fixtures' dtype
    before = engine_config(EngineProfile.optimized(), source, settings)
    assert "speculative_config" not in before.args, "on a CPU: no drafts until measured"
    assert "no speculation until measured" in before.notes[0]
    key = choice_key(source, settings, gpu=False)
    store_choice(key, choose(PLAIN, [ProbeRun("ngram", 4, 200.0, (0, 0, 0, 100, 0))]))
    assert stored_choice(key) is not None and stored_choice(key) == choose(
        PLAIN, [ProbeRun("ngram", 4, 200.0, (0, 0, 0, 100, 0))]
    )
    after = engine_config(EngineProfile.optimized(), source, settings)
    spec = after.args["speculative_config"].value
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 3
    assert after.notes[0].startswith("measured: ngram with 3 drafts")
    assert choice_key(source, EngineSettings(dtype="float32"), gpu=False) != key, "per dtype"
    store_choice(key, choose(PLAIN, [ProbeRun("mtp", 4, 10.0, (100, 0, 0, 0, 0))]))
    assert "speculative_config" not in engine_config(EngineProfile.optimized(), source, settings).args
    assert "speculative_config" not in engine_config(EngineProfile.baseline(), source, settings).args
    optimized = EngineProfile.optimized()
    forced = engine_config(optimized, source, settings.model_copy(update={"speculation": "mtp"}))
    assert forced.args["speculative_config"].value["model"] == str(tiny.drafter), "settings win"
    forget_choice(key)
    assert engine_config(EngineProfile.optimized(), source, settings).notes == before.notes
    off = engine_config(optimized, source, settings.model_copy(update={"speculation": "none"}))
    assert "speculative_config" not in off.args and "speculation off" in off.notes[0]
